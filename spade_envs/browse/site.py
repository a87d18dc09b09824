"""Write the browser's pages into a folder, or serve them on localhost, rebuilt on each visit of the overview.

The site needs no server: every page is one file with its style and script inline, linked relatively, so
``file://RUN_DIR/browse/index.html`` works. ``--serve`` only saves rerunning the command on a run in progress.
"""

from __future__ import annotations

import argparse
import functools
import http.server
from pathlib import Path

from spade_envs.browse.load import design_id, find_run_dir, load_run
from spade_envs.browse.pages import design_page, designs_page, episodes_page, overview_page

__all__ = ["build_site", "serve", "site_server"]


def build_site(run_dir: str | Path, out: str | Path | None = None) -> Path:
    """Build the site of ``run_dir`` into ``out`` (default ``<spade.run_dir>/browse``); returns its index page."""
    run = load_run(run_dir)
    folder = Path(out) if out is not None else run.root / "browse"
    (folder / "designs").mkdir(parents=True, exist_ok=True)
    pages = {"index.html": overview_page(run), "designs.html": designs_page(run), "episodes.html": episodes_page(run)}
    pages.update({f"designs/{design_id(d)}.html": design_page(d) for d in run.designs})
    for name, text in pages.items():
        tmp = folder / (name + ".tmp")
        tmp.write_text(text, encoding="utf-8", errors="replace")  # a lone surrogate from the record: "?"
        tmp.replace(folder / name)  # a browser reloading meanwhile sees the old page or the new one, never half
    return folder / "index.html"


class _Handler(http.server.SimpleHTTPRequestHandler):
    """Serves the site's folder; a request for the overview rebuilds the site first (the run may have moved on)."""

    def __init__(self, *args, run_dir: Path, **kwargs) -> None:
        self.run_dir = run_dir
        super().__init__(*args, **kwargs)

    def do_GET(self) -> None:
        if self.path in ("/", "/index.html"):
            build_site(self.run_dir, self.directory)
        super().do_GET()


def site_server(run_dir: str | Path, port: int, out: str | Path | None = None) -> http.server.ThreadingHTTPServer:
    """An HTTP server of the site of ``run_dir`` on ``127.0.0.1:port`` (localhost only: env text is untrusted)."""
    root = find_run_dir(run_dir)
    index = build_site(root, out)
    handler = functools.partial(_Handler, run_dir=root, directory=str(index.parent))
    return http.server.ThreadingHTTPServer(("127.0.0.1", port), handler)


def serve(run_dir: str | Path, port: int, out: str | Path | None = None) -> None:
    """Serve the site of ``run_dir`` until interrupted; each visit of the overview rebuilds it."""
    with site_server(run_dir, port, out) as server:
        print(f"serving {server.RequestHandlerClass.keywords['directory']} on "
              f"http://127.0.0.1:{server.server_address[1]}/ (Ctrl-C stops)", flush=True)  # fmt: skip
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            pass


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``browse`` subcommand's arguments."""
    parser.add_argument("run_dir", help="spade.run_dir, or a launcher's RUN_DIR holding it as spade/")
    parser.add_argument("--out", help="site folder (default: <spade.run_dir>/browse)")
    parser.add_argument("--serve", type=int, metavar="PORT", help="also serve it on 127.0.0.1:PORT (0: any free port)")


def run_args(args: argparse.Namespace) -> int:
    """Build (and with ``--serve`` serve) the site; prints the index page's path."""
    index = build_site(args.run_dir, args.out)
    print(index)
    if args.serve is not None:
        serve(args.run_dir, args.serve, args.out)
    return 0
