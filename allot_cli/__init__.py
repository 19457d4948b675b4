"""`allot`: the researchers' command line on Allot's REST API (no Django inside).

Configuration: `ALLOT_URL` and `ALLOT_TOKEN`, or what `allot login` stored in the user's
config file (`$XDG_CONFIG_HOME/allot/config.json`, mode 0600).
"""
