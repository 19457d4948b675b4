"""The live server of the browser, fuzz and CLI tests accepts its connections with
TCP_NODELAY (tests/support/nodelay.py): without it every response waited ~40 ms for the
client's delayed acknowledgement of its headers."""

import socket
import socketserver


def test_the_live_server_turns_nagle_off_on_each_connection(live_server):
    handler = live_server.thread.httpd.RequestHandlerClass
    assert handler.disable_nagle_algorithm is True
    # what StreamRequestHandler.setup does with it, on a connected pair of TCP sockets
    listener = socket.create_server(("127.0.0.1", 0))
    client = socket.create_connection(listener.getsockname())
    accepted, _ = listener.accept()
    try:
        instance = handler.__new__(handler)
        instance.request = accepted
        socketserver.StreamRequestHandler.setup(instance)
        assert accepted.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0
    finally:
        for sock in (client, accepted, listener):
            sock.close()
