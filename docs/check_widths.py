"""Check the built docs in a real browser, at a phone's and a projector's
width: no page scrolls sideways, no table or code block is cut.

Each page of the built site is loaded, from a server on 127.0.0.1, in
headless Chromium inside an ``<iframe>`` of the width asked for (a
browser window cannot be made narrower than about 500 px, a frame can),
and measured by the page's own layout: the width the page got, how far
it scrolls sideways, and each table and ``<pre>`` block whose content is
wider than its box (it scrolls inside it: a reader sees it cut).  With
``--screenshots DIR`` each page is also saved as a PNG at each width.

    python docs/check_widths.py docs/_build/html            # 390 and 1280
    python docs/check_widths.py docs/_build/html --screenshots shots

Exit status 1 when a page scrolls or a block is cut.  Needs Chromium
(Debian: ``apt-get install chromium``).
"""
import argparse
import functools
import http.server
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading

#: The widths checked by default: a phone's, and a projector's
WIDTHS = (390, 1280)
#: Chromium's flags for a machine without a display or a network
CHROMIUM_FLAGS = ('--headless', '--no-sandbox', '--disable-gpu',
                  '--disable-quic', '--no-first-run',
                  '--disable-background-networking',
                  '--disable-component-update', '--disable-sync',
                  '--hide-scrollbars')
#: Seconds one Chromium run may take
TIMEOUT = 300

HARNESS = """<!DOCTYPE html><html><body><pre id="result">pending</pre>
<script>
const pages = %(pages)s, width = %(width)d;
async function measure(url) {
  const f = document.createElement('iframe');
  f.width = width; f.height = 900; f.src = url;
  document.body.appendChild(f);
  await new Promise(done => { f.onload = done; });
  const d = f.contentDocument, root = d.documentElement;
  const cut = [];
  for (const el of d.querySelectorAll('table, pre')) {
    const over = el.scrollWidth - el.clientWidth;
    if (over > 1 && !el.closest('table pre, pre table'))
      cut.push({tag: el.tagName.toLowerCase(), over: over,
                text: el.innerText.trim().slice(0, 60)});
  }
  const wide = [];
  if (root.scrollWidth > root.clientWidth)
    for (const el of d.body.querySelectorAll('*')) {
      const right = el.getBoundingClientRect().right;
      if (right > root.clientWidth + 0.5 && wide.length < 3)
        wide.push({tag: el.tagName.toLowerCase(), right: right,
                   cls: String(el.className).slice(0, 40),
                   text: (el.innerText || '').trim().slice(0, 40)});
    }
  const found = {page: url, asked: width, width: f.contentWindow.innerWidth,
                 scroll: root.scrollWidth - root.clientWidth, wide: wide,
                 height: root.scrollHeight,
                 tables: d.querySelectorAll('table').length,
                 pres: d.querySelectorAll('pre').length, cut: cut};
  f.remove();
  return found;
}
(async () => {
  const out = [];
  for (const page of pages) out.push(await measure(page));
  document.getElementById('result').textContent = JSON.stringify(out);
})();
</script></body></html>
"""


def chromium():
    """The Chromium executable, or None."""
    for name in ('chromium', 'chromium-browser', 'google-chrome'):
        found = shutil.which(name)
        if found:
            return found
    return None


def html_pages(site):
    """The site's pages, relative to it (Sphinx's own search and index
    pages, and the highlighted sources of modules, left out)."""
    pages = []
    for folder, dirs, names in os.walk(site):
        dirs[:] = sorted(d for d in dirs if not d.startswith('_'))
        pages += [os.path.relpath(os.path.join(folder, n), site)
                  for n in sorted(names) if n.endswith('.html')]
    return [p for p in pages if p not in ('search.html', 'genindex.html',
                                          'py-modindex.html')]


class _Server:
    """The site, and harness pages written beside it, on 127.0.0.1."""

    def __init__(self, site):
        handler = functools.partial(_QuietHandler, directory=site)
        self.httpd = http.server.ThreadingHTTPServer(('127.0.0.1', 0),
                                                     handler)
        self.url = f'http://127.0.0.1:{self.httpd.server_address[1]}/'
        threading.Thread(target=self.httpd.serve_forever,
                         daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


def _run_chromium(args, user_dir):
    return subprocess.run(
        [chromium(), *CHROMIUM_FLAGS, f'--user-data-dir={user_dir}', *args],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
        universal_newlines=True, timeout=TIMEOUT)


def measure(site, pages=None, widths=WIDTHS):
    """Load every page at every width and measure it.

    Returns
    -------
    list of dict
        One per page and width: ``page``, ``width`` (what the page got),
        ``scroll`` (pixels it scrolls sideways), ``height``, ``tables``,
        ``pres`` (how many) and ``cut`` (each block wider than its box:
        ``tag``, ``over`` in pixels, the start of its ``text``).
    """
    pages = html_pages(site) if pages is None else pages
    server, user_dir = _Server(site), tempfile.mkdtemp(prefix='chromium-')
    harness = os.path.join(site, '_widths.html')
    found = []
    try:
        for width in widths:
            with open(harness, 'w', encoding='utf-8') as f:
                f.write(HARNESS % dict(pages=json.dumps(pages), width=width))
            out = _run_chromium(['--virtual-time-budget=600000',
                                 '--dump-dom', server.url + '_widths.html'],
                                user_dir).stdout
            result = re.search(r'<pre id="result">(.*?)</pre>', out, re.S)
            if result is None or result.group(1) == 'pending':
                raise RuntimeError(f'Chromium measured nothing at {width} '
                                   f'px: {out[-300:]!r}')
            found += json.loads(result.group(1).replace('&amp;', '&')
                                .replace('&lt;', '<').replace('&gt;', '>'))
    finally:
        server.close()
        os.remove(harness) if os.path.exists(harness) else None
        shutil.rmtree(user_dir, ignore_errors=True)
    return found


def screenshots(site, found, out_dir):
    """Save each measured page at its width as ``out_dir/WIDTH/PAGE.png``,
    whole (up to 12,000 px tall)."""
    server, user_dir = _Server(site), tempfile.mkdtemp(prefix='chromium-')
    try:
        for row in found:
            png = os.path.join(out_dir, str(row['asked']),
                               row['page'].replace('/', '__')[:-5] + '.png')
            os.makedirs(os.path.dirname(png), exist_ok=True)
            height = min(max(row['height'], 600), 12_000)
            frame = (f'<iframe src="{row["page"]}" width="{row["asked"]}" '
                     f'height="{height}" style="border:0"></iframe>')
            harness = os.path.join(site, '_shot.html')
            with open(harness, 'w', encoding='utf-8') as f:
                f.write('<!DOCTYPE html><body style="margin:0">'
                        + frame + '</body>')
            _run_chromium([f'--window-size={max(row["asked"], 500)},'
                           f'{height}', f'--screenshot={png}',
                           '--virtual-time-budget=20000',
                           server.url + '_shot.html'], user_dir)
            os.remove(harness)
    finally:
        server.close()
        shutil.rmtree(user_dir, ignore_errors=True)


def problems(found):
    """Lines for each page that scrolls and each block that is cut."""
    lines = []
    for row in found:
        where = f'{row["page"]} at {row["asked"]} px'
        if row['width'] != row['asked']:
            lines.append(f'{where}: the page got {row["width"]} px')
        if row['scroll'] > 0:
            widest = '; '.join(f'<{w["tag"]} class="{w["cls"]}"> ends at '
                               f'{w["right"]:.1f} px ({w["text"]!r})'
                               for w in row.get('wide', []))
            lines.append(f'{where}: scrolls sideways by {row["scroll"]} px'
                         + (f': {widest}' if widest else ''))
        for block in row['cut']:
            lines.append(f'{where}: a <{block["tag"]}> is cut by '
                         f'{block["over"]} px ({block["text"]!r})')
    return lines


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('site', help='the built HTML, docs/_build/html')
    parser.add_argument('--width', type=int, action='append',
                        help='a width in px (repeatable; default 390 '
                             'and 1280)')
    parser.add_argument('--screenshots', metavar='DIR',
                        help='also save each page as DIR/WIDTH/PAGE.png')
    args = parser.parse_args(argv)
    if chromium() is None:
        print('check_widths: Chromium is not installed (Debian: apt-get '
              'install chromium)', file=sys.stderr)
        return 2
    found = measure(args.site, widths=tuple(args.width or WIDTHS))
    for width in sorted({row['asked'] for row in found}):
        rows = [row for row in found if row['asked'] == width]
        print(f'{width} px: {len(rows)} pages, '
              f'{sum(r["scroll"] > 0 for r in rows)} scroll sideways; '
              f'{sum(r["tables"] for r in rows)} tables and '
              f'{sum(r["pres"] for r in rows)} code blocks, '
              f'{sum(len(r["cut"]) for r in rows)} cut')
    if args.screenshots:
        screenshots(args.site, found, args.screenshots)
    lines = problems(found)
    print('\n'.join(lines))
    return 1 if lines else 0


if __name__ == '__main__':
    sys.exit(main())
