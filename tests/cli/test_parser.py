"""The `allot` command line as argparse reads it (allot_cli/app.py): the commands and
options `--help` lists with their texts, defaults and what is required; refusals exit 2
naming the flag. No server: nothing here gets as far as a request (but one stand-in that
answers every request with a redirect)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from allot_cli import client
from allot_cli.main import parser
from tests.support.cli import Cli

COMMANDS = (
    "login", "submit", "queue", "show", "cancel", "clusters", "hosts", "usage", "shares", "tokens",
)  # fmt: skip


@pytest.fixture
def cli(tmp_path):
    cli = Cli("http://127.0.0.1:9", tmp_path, token="x")  # nothing listens there
    cli.env["COLUMNS"] = "80"
    return cli


def test_help_lists_every_command_with_its_first_sentence(cli):
    result = cli("--help")
    assert result.returncode == 0 and result.stderr == ""
    lines = result.stdout.splitlines()
    assert lines[0] == "Usage: allot [OPTIONS] COMMAND [ARGS]..."
    assert "Submit and follow GPU jobs on Allot (like sbatch/squeue/scancel/sshare)." in lines
    listed = [line.split()[0] for line in lines[lines.index("Commands:") + 2 :]]
    assert listed == list(COMMANDS)
    assert any(line.split()[1:] == ["Submit", "a", "job", "(like", "sbatch)."] for line in lines)
    assert all(len(line) <= 80 for line in lines)


def test_no_command_prints_the_help_and_exits_2(cli):
    result = cli()
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.startswith("Usage: allot [OPTIONS] COMMAND")


def test_a_commands_help_says_each_option_its_default_and_what_is_required(cli):
    result = cli("submit", "--help")
    assert result.returncode == 0
    text = " ".join(result.stdout.split())
    assert text.startswith("Usage: allot submit [OPTIONS] [args]... Submit a job (like sbatch).")
    for expected in (
        "-A, --project, --account <str> Project path, id, or its name alone when one project "
        "has it. [required]",
        "-t, --min-runtime, --time-min <str> Protected runtime (15m, 2h, ...); 0 submits unallocated work "
        "(free, preemptible at any time). [required]",
        "-G, --gpus <int> 1, 2, 4, 8 or whole hosts. [default: 1]",
        "--kind <str> debug, training, interactive, inference, batch or sweep. [default: training]",
        "-e, --env <str> K=V, repeatable.",
        "--json Print the server's JSON answer.",
        "args The command, after `--` (instead of --command).",
    ):
        assert expected in text, expected
    assert "-h" not in result.stdout.split()  # --help only, as before
    shown = " ".join(cli("cancel", "--help").stdout.split())
    assert "job_ids One or more job ids. [required]" in shown


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["submit", "-t", "0"], "the following arguments are required: -A/--project"),
        (["submit", "-A", "a", "-t", "0", "--gpus", "eight"], "argument -G/--gpus"),
        (["queue", "--proj", "x"], "unrecognized arguments: --proj x"),  # no abbreviations
        (["queue", "--limit", "many"], "argument --limit"),
        (["show", "one"], "argument job_id: invalid int value: 'one'"),
        (["cancel"], "the following arguments are required: job_ids"),
        (["tokens", "revoke"], "give the keys of the tokens to revoke, or --all-others"),
        (["tokens", "revoke", "abc", "--all-others"], "give the keys"),
        (["tokens", "drop"], "invalid choice: 'drop'"),
        (["squeue"], "invalid choice: 'squeue'"),
    ],
)
def test_bad_input_is_refused_before_any_request_with_exit_2(cli, args, said):
    result = cli(*args)
    assert result.returncode == 2 and said in result.stderr, result.stderr
    assert "cannot reach" not in result.stderr


def test_a_prompt_cut_short_is_aborted_with_exit_1(cli):
    result = cli("login", stdin="")  # no user name: end of input
    assert result.returncode == 1 and result.stderr.endswith("\nAborted!\n"), result.stderr


def test_each_option_reaches_its_command_under_its_own_name():
    """`--command` is submit's, `--url` the application's, `--all` queue's `all_rows`."""
    root = parser()
    submit = vars(
        root.parse_args(
            ["--url", "http://s", "submit", "-A", "a", "-t", "0"]
            + ["--command", "python x.py", "-e", "A=1", "-e", "B=2"]
        )
    )
    assert submit["url"] == "http://s" and submit["command"] == "python x.py"
    assert submit["env"] == ["A=1", "B=2"] and submit["args"] == []
    after = vars(root.parse_args(["submit", "-A", "a", "-t", "0", "--", "run", "--steps", "3"]))
    assert after["args"] == ["run", "--steps", "3"] and after["command"] is None
    revoke = vars(root.parse_args(["tokens", "revoke", "--all-others", "--json"]))
    assert (revoke["keys"], revoke["all_others"], revoke["as_json"]) == ([], True, True)
    assert vars(root.parse_args(["tokens", "--json"]))["func"].__name__ == "tokens"
    queue = vars(root.parse_args(["queue", "--all", "-l", "-t", "all", "--json"]))
    assert (queue["all_rows"], queue["long"], queue["state"], queue["as_json"]) == (
        True, True, "all", True,
    )  # fmt: skip


def test_plain_http_without_a_proxy_skips_urllib(monkeypatch):
    for name in ("http_proxy", "HTTP_PROXY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(sys, "platform", "linux")
    assert client._plain_http("http://allot.example:8000/api/v1/")
    assert not client._plain_http("https://allot.example/api/v1/")
    monkeypatch.setenv("HTTP_PROXY", "http://proxy:3128")
    assert not client._plain_http("http://allot.example:8000/api/v1/")  # urllib's proxies
    monkeypatch.delenv("HTTP_PROXY")
    monkeypatch.setattr(sys, "platform", "darwin")  # urllib reads the system's proxies there
    assert not client._plain_http("http://allot.example:8000/api/v1/")


def test_the_plain_http_client_leaves_https_to_the_rest_of_the_process():
    """The copy of http.client imported without ssl is the client's alone: http.client and
    urllib imported afterwards in the same process still speak https."""
    code = (
        "from allot_cli import client\n"
        "plain = client._http_client(True)\n"
        "import http.client, ssl, urllib.request\n"
        "print(hasattr(plain, 'HTTPSConnection'), plain is http.client,"
        " hasattr(http.client, 'HTTPSConnection'), hasattr(urllib.request, 'HTTPSHandler'))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", "False", "True", "True"]


@pytest.mark.parametrize("url", ["127.0.0.1:8000", "ftp://allot.example.org"])
def test_a_server_url_without_http_is_refused_naming_where_it_comes_from(tmp_path, url):
    result = Cli(url, tmp_path, token="x")("queue")
    assert result.returncode == 2, result.stderr
    assert f"must start with http:// or https://, got '{url}'" in result.stderr
    assert "ALLOT_URL" in result.stderr and "unknown url type" not in result.stderr


def test_a_server_that_redirects_says_to_give_its_https_address(tmp_path):
    """Production redirects plain http to https: the CLI follows no redirect, and said
    only "Moved Permanently (HTTP 301)"."""
    import threading
    from http.server import BaseHTTPRequestHandler, HTTPServer

    class Redirect(BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(301)
            self.send_header("Location", f"https://allot.example.org{self.path}")
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args):
            pass

    server = HTTPServer(("127.0.0.1", 0), Redirect)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        result = Cli(f"http://127.0.0.1:{server.server_port}", tmp_path, token="x")("queue")
    finally:
        server.shutdown()
    assert result.returncode == 1, result.stderr
    assert "the server redirects /api/v1/" in result.stderr and "(HTTP 301)" in result.stderr
    assert "https://" in result.stderr and "ALLOT_URL" in result.stderr
