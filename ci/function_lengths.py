#!/usr/bin/env python3
"""The longest functions of C++ sources, for the "no function over ~80 lines" rule (issue 20).

Usage: ci/function_lengths.py [--top N] [--over L] DIR_OR_FILE...
A function is a line that ends a signature with '{' (not a control statement or a lambda) up to its
matching '}'; methods defined in classes count on their own. Lines of the body, braces included.
"""
import argparse, pathlib, re, sys

CONTROL = re.compile(r'^\s*(if|for|while|switch|else|do|catch|try|return|namespace|struct|class|enum|union|extern)\b')
SIGNATURE = re.compile(r'\)\s*(const)?\s*(override)?\s*(noexcept)?\s*(->\s*[\w:<>,\s*&]+)?\s*\{\s*(//.*)?$')


def functions(path):
    lines = path.read_text(errors='replace').splitlines()
    out, i = [], 0
    while i < len(lines):
        line = lines[i]
        if SIGNATURE.search(line) and not CONTROL.match(line) and '](' not in line and '] (' not in line \
                and not line.lstrip().startswith(('//', '#', '}')):
            depth, j = 0, i
            while j < len(lines):
                code = re.sub(r'"(\\.|[^"\\])*"|\'(\\.|[^\'\\])*\'|//.*', '', lines[j])
                depth += code.count('{') - code.count('}')
                if depth <= 0 and j > i or (depth == 0 and '{' in code):
                    break
                j += 1
            name = re.search(r'([\w:~<>]+)\s*\(', line)
            # the signature may start on earlier lines: name from the first line that has '('
            k = i
            while not name and k > 0 and k > i - 4:
                k -= 1
                name = re.search(r'([\w:~<>]+)\s*\(', lines[k])
            out.append((j - i + 1, f'{path}:{i + 1}', name.group(1) if name else '?'))
            i += 1  # nested definitions (methods of local classes) count too
            continue
        i += 1
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--top', type=int, default=15)
    ap.add_argument('--over', type=int, default=0)
    ap.add_argument('paths', nargs='+')
    a = ap.parse_args()
    found = []
    for p in a.paths:
        p = pathlib.Path(p)
        for f in ([p] if p.is_file() else sorted(p.rglob('*.cpp')) + sorted(p.rglob('*.h'))):
            found += functions(f)
    found.sort(reverse=True)
    shown = [f for f in found if f[0] > a.over][:a.top] if a.over else found[:a.top]
    for n, where, name in shown:
        print(f'{n:5d}  {name:40s} {where}')


if __name__ == '__main__':
    sys.exit(main())
