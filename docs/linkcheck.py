"""Check the links of the built guide (`mdbook build docs`, then
`python3 docs/linkcheck.py docs/book`): every relative `href` and `src` of every page must
name a file of the book, and every `#fragment` an `id` of that page. External links
(http, https, mailto) are not fetched (CI reaches no web). Exit 1 with a line per broken
link."""

import html.parser
import os
import sys
import urllib.parse


class Page(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.links = []
        self.ids = set()

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if "id" in a:
            self.ids.add(a["id"])
        if tag == "a" and "name" in a:
            self.ids.add(a["name"])
        for key in ("href", "src"):
            if a.get(key):
                self.links.append(a[key])


def parse(path):
    p = Page()
    with open(path, encoding="utf-8") as f:
        p.feed(f.read())
    return p


def main(root):
    pages = {}
    for d, _, files in os.walk(root):
        for f in files:
            # 404.html is written for a server's root (`<base href="/">`), not for a folder.
            if f.endswith(".html") and f != "404.html":
                pages[os.path.normpath(os.path.join(d, f))] = None
    if not pages:
        print(f"no HTML pages under {root}: build the guide first (mdbook build docs)")
        return 1
    for p in pages:
        pages[p] = parse(p)
    broken = []
    checked = 0
    for path, page in sorted(pages.items()):
        for link in page.links:
            u = urllib.parse.urlsplit(link)
            if u.scheme or link.startswith("//"):
                continue
            checked += 1
            target = path if not u.path else os.path.normpath(
                os.path.join(os.path.dirname(path), urllib.parse.unquote(u.path)))
            if u.path and os.path.isdir(target):
                target = os.path.join(target, "index.html")
            if not os.path.exists(target):
                broken.append(f"{os.path.relpath(path, root)}: {link}: no such file")
                continue
            if u.fragment and target.endswith(".html"):
                ids = pages.get(target) or parse(target)
                if urllib.parse.unquote(u.fragment) not in ids.ids:
                    broken.append(f"{os.path.relpath(path, root)}: {link}: no such anchor")
    for b in broken:
        print(b)
    print(f"links: {checked} checked in {len(pages)} pages, {len(broken)} broken")
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "docs/book"))
