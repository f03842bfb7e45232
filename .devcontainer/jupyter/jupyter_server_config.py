"""Jupyter in the dev container: the README's `.venv/bin/jupyter notebook`.

`devcontainer.json` puts this folder first on `JUPYTER_CONFIG_PATH`.
Notebook 7, which the lock files install, is a Jupyter Server application
and reads this file.  The container runs as root, which the server
refuses unless allowed; it has no browser to open; the port is the one
`devcontainer.json` forwards.
"""
c = get_config()  # noqa: F821  (defined by Jupyter when it reads the file)

c.ServerApp.allow_root = True
c.ServerApp.open_browser = False
c.ServerApp.port = 8888
