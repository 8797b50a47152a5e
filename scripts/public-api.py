#!/usr/bin/env python3
"""List a crate's public API from rustdoc's JSON output: one line per (kind, path), every path
by which an item can be named from outside the crate (re-exports included), `#[doc(hidden)]`
items left out.

    cargo +nightly rustdoc -p cai-runtime --all-features -- -Z unstable-options --output-format json
    scripts/public-api.py target/doc/cai_runtime.json            # the listing
    scripts/public-api.py target/doc/cai_runtime.json --summary  # counts only

Methods and associated items are listed under their type (`Type::method`), trait impls are not
(they are reached through the trait). `--summary` counts the items and those reachable by more than
one path.
"""

import json
import sys
from collections import Counter


def hidden(item):
    for a in item.get("attrs") or []:
        text = a if isinstance(a, str) else json.dumps(a)
        if "doc(hidden)" in text.replace(" ", "") or "Hidden" in text:
            return True
    return False


def walk(doc, paths_of=None):
    index = doc["index"]
    out = set()

    def item_kind(item):
        return next(iter(item["inner"])) if isinstance(item["inner"], dict) else item["inner"]

    def visit(item_id, path, seen):
        item = index.get(str(item_id))
        if item is None or item["crate_id"] != 0 or hidden(item):
            return
        kind = item_kind(item)
        inner = item["inner"][kind] if isinstance(item["inner"], dict) else {}
        if kind == "module":
            if item_id in seen:
                return
            out.add(("mod", "::".join(path)))
            for child in inner["items"]:
                visit_child(child, path, seen | {item_id})
            return
        if kind == "use":
            return
        out.add((kind, "::".join(path)))
        if paths_of is not None:
            paths_of.setdefault(item_id, set()).add("::".join(path))
        if kind in ("struct", "enum", "union"):
            if kind == "enum":
                for v in inner.get("variants", []):
                    var = index.get(str(v))
                    if var and not hidden(var):
                        out.add(("variant", "::".join(path + [var["name"]])))
            for impl_id in inner.get("impls", []):
                impl = index.get(str(impl_id))
                if impl is None or hidden(impl):
                    continue
                im = impl["inner"]["impl"]
                if im.get("trait") is not None or im.get("is_synthetic") or im.get("blanket_impl"):
                    continue
                for m in im["items"]:
                    mi = index.get(str(m))
                    if mi and mi["visibility"] == "public" and not hidden(mi):
                        out.add((item_kind(mi), "::".join(path + [mi["name"]])))
        if kind == "trait":
            for m in inner.get("items", []):
                mi = index.get(str(m))
                if mi and not hidden(mi):
                    out.add((item_kind(mi), "::".join(path + [mi["name"]])))

    def visit_child(child_id, path, seen):
        child = index.get(str(child_id))
        if child is None or child["visibility"] != "public" or hidden(child):
            return
        kind = item_kind(child)
        if kind == "use":
            use = child["inner"]["use"]
            target = use["id"]
            if target is None:
                return
            if use["is_glob"]:
                target_item = index.get(str(target))
                if target_item and item_kind(target_item) == "module":
                    for c in target_item["inner"]["module"]["items"]:
                        visit_child(c, path, seen)
                return
            visit(target, path + [use["name"]], seen)
            return
        if child["name"] is None:
            return
        visit(child_id, path + [child["name"]], seen)

    root = doc["root"]
    visit(root, [index[str(root)]["name"]], set())
    return out


def main():
    doc = json.load(open(sys.argv[1]))
    paths_of = {}
    items = walk(doc, paths_of)
    if "--summary" in sys.argv:
        kinds = Counter(k for k, _ in items)
        print(f"{len(items)} public paths: " + ", ".join(f"{n} {k}" for k, n in sorted(kinds.items())))
        twice = sorted(min(p) for p in paths_of.values() if len(p) > 1)
        print(f"{len(paths_of)} items (modules, types, traits, functions...; not their members), "
              f"{len(twice)} of them reachable by more than one path" + (f": {', '.join(twice)}" if twice else ""))
        return
    for k, p in sorted(items, key=lambda t: (t[1], t[0])):
        print(f"{k:10} {p}")


if __name__ == "__main__":
    main()
