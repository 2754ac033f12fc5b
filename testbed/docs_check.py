#!/usr/bin/python3
"""docs_check.py [-v] [--extra FILE.md]... [ROOT] — every name the docs mention exists.

Reads every Markdown file of the tree (README.md, docs/*.md, fuzz/README.md, ...) and checks,
against the tree, the Makefile and the built executables' --help output:

  paths        `apps/x/y.c`, `testbed/bench.sh`, `tl_in.c`: a repo path in code must exist
               (relative to the root; a bare file name anywhere in the tree); `build/...`
               must be an output the Makefile or a script makes (`build/wharf-X`: an app
               folder apps/X or testbed/X); a Markdown link's target must exist
  make targets `make X` in code must be a target of the Makefile
  flags        a --flag after build/wharf-X (or wharf-X) in code must be in that executable's
               --help output (EAL's options before `--`, the app's after it); after a repo
               script, in that script; in a table's "flag" column (the README's knobs), in
               wharf-train's --help; anywhere else, in some executable's --help or script
  JSON keys    in a table's "JSON key" column, every part of a.b.c must be a quoted string
               of the sources
  identifiers  an UPPER_CASE name with an underscore (WHARF_*, PADDLE_*, PS_T_SAVE, ...)
               and a lower_case one in code (fz_conn_send_many, rtt_p50_us) must occur in
               the sources (*.c, *.h, *.sh, *.py, Makefile) or DPDK's headers
  telemetry    /wharf/... command names must be registered in the sources
  tests        t_x (testbed/tests/t_x.sh) and test_x (<layer>/tests/test_x.c) must exist
  history      no reference to the plan outside the tree (anywhere in it), no "session N"
               in the docs

Prints each missing name as FILE:LINE: KIND 'NAME' (why), then how many names of each kind
were checked; -v lists them. Exit 1 if any is missing. --extra checks one more Markdown file
from outside the tree as if it were one of the docs (t_docs.sh feeds it wrong names, to see
each reported).
Needs the executables built (make all); takes a second or two.
"""
import glob
import os
import re
import shutil
import subprocess
import sys

ARGS = sys.argv[1:]
VERBOSE = "-v" in ARGS
EXTRA = [os.path.abspath(ARGS[i + 1]) for i, a in enumerate(ARGS[:-1]) if a == "--extra"]
ARGS = [a for i, a in enumerate(ARGS) if a not in ("-v", "--extra") and
        (i == 0 or ARGS[i - 1] != "--extra")]
ROOT = os.path.abspath(ARGS[0] if ARGS else os.path.join(os.path.dirname(__file__), ".."))
BUILD = os.path.join(ROOT, "build")
SRC_EXT = (".c", ".h", ".sh", ".py", ".gp", ".supp")
DOC_EXT = ("c", "h", "sh", "py", "md", "json", "env", "gp", "supp", "txt", "png", "log",
           "wal", "a", "so", "pc", "csv")
DPDK_INCLUDE = "/usr/include/dpdk"

problems = []
checked = {}  # kind -> set of names looked at (docs_check.py -v lists them)


def seen(kind, name):
    checked.setdefault(kind, set()).add(name)


def report(path, line, kind, name, why):
    rel = os.path.relpath(path, ROOT)
    problems.append(f"{path if rel.startswith('..') else rel}:{line}: {kind} '{name}' ({why})")


def tree_files():
    try:
        out = subprocess.run(["git", "-C", ROOT, "ls-files", "--cached", "--others",
                              "--exclude-standard"], capture_output=True, text=True,
                             check=True).stdout.split("\n")
        files = [f for f in out if f and os.path.exists(os.path.join(ROOT, f))]
    except (OSError, subprocess.CalledProcessError):
        files = []
        for d, dirs, names in os.walk(ROOT):
            dirs[:] = [x for x in dirs if x not in (".git", "build")]
            files += [os.path.relpath(os.path.join(d, n), ROOT) for n in names]
    return sorted(f for f in files if not f.startswith("build/"))


FILES = tree_files()
DIRS = {os.path.dirname(f) for f in FILES}
DIRS |= {d.rsplit("/", i)[0] for d in list(DIRS) for i in range(1, d.count("/") + 1)}
BASENAMES = {os.path.basename(f) for f in FILES}
TOP = {f.split("/")[0] for f in FILES} | {"build"}
DOCS = [f for f in FILES if f.endswith(".md")] + EXTRA


def read(rel):
    try:
        with open(os.path.join(ROOT, rel), errors="replace") as f:
            return f.read()
    except OSError:
        return ""


SCRIPTS = {f: read(f) for f in FILES
           if (f.endswith((".sh", ".py")) or f == ".ci/run") and f not in ("testbed/tests/t_docs.sh",)}
# The names the docs may use; t_docs.sh's deliberately wrong names are not among them.
NOT_SOURCE = ("testbed/tests/t_docs.sh", "testbed/docs_check.py")
SOURCE = "\n".join(read(f) for f in FILES if f not in NOT_SOURCE and
                   (f.endswith(SRC_EXT) or f in ("Makefile", ".ci/run"))) + "\n"
_dpdk = None


def in_dpdk_headers(name):
    global _dpdk
    if _dpdk is None:
        parts = []
        for h in glob.glob(os.path.join(DPDK_INCLUDE, "**", "*.h"), recursive=True):
            with open(h, errors="replace") as f:
                parts.append(f.read())
        _dpdk = "\n".join(parts)
    return re.search(r"\b" + re.escape(name) + r"\b", _dpdk) is not None


WORD = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_")
ALNUM = WORD - {"_"}


def in_source(name, prefixed=False):
    """name occurs in the sources as a whole word (prefixed: or as the tail of one after an
    underscore: FIN_WAIT_1 in TL_FIN_WAIT_1). str.find then a look at the neighbours: the same
    test as a regex with a lookbehind, which the re module scans for at every position of the
    sources' megabytes (12 s of the check's 13)."""
    not_before = ALNUM if prefixed else WORD
    i = SOURCE.find(name)
    while i >= 0:
        end = i + len(name)
        if (i == 0 or SOURCE[i - 1] not in not_before) and SOURCE[end:end + 1] not in WORD:
            return True
        i = SOURCE.find(name, i + 1)
    return False


# ---- build outputs, make targets, help texts ------------------------------------------
APP_NAMES = {d.split("/")[1] for d in DIRS if re.fullmatch(r"(apps|testbed)/[^/]+", d)
             and any(f.startswith(d + "/") and f.endswith(".c") and f.count("/") == 2
                     for f in FILES)} - {"common", "tests", "extern"}
BUILD_OUTPUTS = set(re.findall(r"build/([A-Za-z0-9_.-]+)", SOURCE))
BUILD_OUTPUTS |= set(re.findall(r"\$\(BUILD\)/([A-Za-z0-9_.-]+)", read("Makefile")))


def make_targets():
    targets = set()
    try:
        db = subprocess.run(["make", "-C", ROOT, "-pRrq", "-f", "Makefile", ":"],
                            capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.TimeoutExpired):
        db = read("Makefile")
    for m in re.finditer(r"^([A-Za-z0-9_.%/-]+):(?!=)", db, re.M):
        targets.add(m.group(1))
    for m in re.finditer(r"^\.PHONY:(.*)$", db, re.M):
        targets |= set(m.group(1).split())
    return targets


TARGETS = make_targets()
_help = {}


def run_help(exe, *args):
    try:
        r = subprocess.run([exe, *args], capture_output=True, text=True, timeout=20,
                           stdin=subprocess.DEVNULL)
        return r.returncode, r.stdout + r.stderr
    except (OSError, subprocess.TimeoutExpired):
        return -1, ""


def help_text(app):
    """The executable's own --help (its app options): `X --help`, or `X -- --help` when the
    first answer is EAL's usage or a refusal (a DPDK program hands its arguments to EAL
    first; the switch wants its "--")."""
    if app not in _help:
        exe = os.path.join(BUILD, "wharf-" + app)
        text = None
        if os.access(exe, os.X_OK):
            rc, text = run_help(exe, "--help")
            if rc != 0 or "EAL common options" in text:
                text = run_help(exe, "--", "--help")[1]
        _help[app] = text
    return _help[app]


def eal_help():
    if "EAL" not in _help:
        text = ""
        for app in sorted(APP_NAMES):
            exe = os.path.join(BUILD, "wharf-" + app)
            if os.access(exe, os.X_OK):
                t = run_help(exe, "--help")[1]
                if "EAL common options" in t:
                    text = t
                    break
        _help["EAL"] = text
    return _help["EAL"]


def flag_in(flag, text):
    return re.search(r"(?<![A-Za-z0-9-])" + re.escape(flag) + r"(?![A-Za-z0-9-])",
                     text or "") is not None


def all_flags_text():
    if "ALL" not in _help:
        _help["ALL"] = "\n".join([help_text(a) or "" for a in sorted(APP_NAMES)] +
                                 [eal_help()] + list(SCRIPTS.values()))
    return _help["ALL"]


if not os.access(os.path.join(BUILD, "wharf-train"), os.X_OK):
    print("docs_check: build/wharf-train is not built: run make all first")
    sys.exit(2)

# ---- reading the Markdown -------------------------------------------------------------


def doc_pieces(text):
    """(line, kind, text): kind 'block' for a fenced block's line (continuations joined,
    comments dropped), 'span' for an inline code span (which may run over lines), 'prose'
    for the rest of a line."""
    out = []
    lines = text.split("\n")
    i, fence, para, para_start = 0, False, [], 0

    def flush():
        if not para:
            return
        joined = "\n".join(para)
        prose = re.sub(r"`[^`]*`", lambda m: " " + "\n" * m.group(0).count("\n"), joined)
        for n, p in enumerate(prose.split("\n")):
            out.append((para_start + n, "prose", p))
        for m in re.finditer(r"`([^`]+)`", joined):
            out.append((para_start + joined.count("\n", 0, m.start()), "span",
                        m.group(1).replace("\n", " ")))
        para.clear()

    while i < len(lines):
        line = lines[i]
        if line.lstrip().startswith("```"):
            flush()
            fence = not fence
            i += 1
            continue
        if fence:
            start, joined = i + 1, line
            while joined.rstrip().endswith("\\") and i + 1 < len(lines):
                i += 1
                joined = joined.rstrip()[:-1] + " " + lines[i]
            joined = re.sub(r"(^|\s)#.*$", "", joined)
            out.append((start, "block", joined))
        elif line.strip() == "" or line.lstrip().startswith("|"):
            flush()
            para_start = i + 1
            para.append(line)
            flush()
            para_start = i + 2
        else:
            if not para:
                para_start = i + 1
            para.append(line)
        i += 1
    flush()
    out.sort(key=lambda x: x[0])
    return out


PATH_RE = re.compile(r"^[A-Za-z0-9_.][A-Za-z0-9_.+-]*(/[A-Za-z0-9_.+*<>{},-]+)+/?$")
FILE_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.+-]*\.(%s)$" % "|".join(DOC_EXT))
# The plan this tree was built from lived outside it; spelled in pieces so this file passes.
OUTSIDE_RE = re.compile(r"\.\./" + "shared|DESIGN" + r"\.md")
SEP_RE = re.compile(r"\s*(?:\|\||&&|\||;|\(|\))\s*")


def placeholder(tok):
    return any(c in tok for c in "<>*{}$[]") or re.match(r"^[A-Z][A-Z_]*(/|\.)", tok)


def check_path(doc, line, tok):
    tok = tok.rstrip(".,:;)").lstrip("(")
    if tok.startswith("./"):
        tok = tok[2:]
    if not tok or placeholder(tok) or tok.startswith("/") or tok.startswith("."):
        return
    if PATH_RE.match(tok):
        first = tok.split("/")[0]
        if first not in TOP and not FILE_RE.match(tok.split("/")[-1]):
            return  # "pull/push", "sync/async": not a path
        seen("path", tok)
        path = tok.rstrip("/")
        if first == "build":
            rest = path.split("/")[1:]
            if rest and rest[0].startswith("wharf-"):
                if rest[0][len("wharf-"):] not in APP_NAMES:
                    report(doc, line, "path", tok, "no apps/ or testbed/ folder builds it")
            elif rest and rest[0] not in BUILD_OUTPUTS:
                report(doc, line, "path", tok, "nothing writes it under build/")
            return
        if path not in FILES and path not in DIRS:
            report(doc, line, "path", tok, "not in the tree")
    elif FILE_RE.match(tok):
        if shutil.which(tok):
            return  # a tool of the system (dpdk-devbind.py)
        seen("path", tok)
        if tok not in BASENAMES and not re.search(r"(?<![A-Za-z0-9_])" + re.escape(tok),
                                                  SOURCE):
            report(doc, line, "file", tok, "no file of that name, and no script writes it")


def app_of(tok):
    m = re.fullmatch(r"(?:\./)?(?:build/)?wharf-([a-z0-9-]+)", tok)
    return m.group(1) if m else None


def check_command(doc, line, code):
    """Flags and make targets of each command in a piece of code."""
    for seg in SEP_RE.split(code):
        toks = seg.split()
        ctx, after_dd, i = None, False, 0
        # Leading VAR=value assignments and wrappers name no command.
        while i < len(toks) and (re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", toks[i]) or
                                 toks[i] in ("sudo", "env", "exec", "time")):
            i += 1
        if i < len(toks):
            head = toks[i]
            if head in ("flock", "timeout"):
                i += 2 if i + 2 < len(toks) else 1
                head = toks[i] if i < len(toks) else ""
            if head == "make":
                for t in toks[i + 1:]:
                    if t.startswith("-") or "=" in t or placeholder(t):
                        continue
                    seen("make target", t)
                    if t not in TARGETS:
                        report(doc, line, "make target", t, "not a Makefile target")
                continue
            if app_of(head):
                ctx = ("app", app_of(head))
            elif head.rstrip("/") in SCRIPTS or head.lstrip("./") in SCRIPTS:
                ctx = ("script", head.lstrip("./"))
            elif not head.startswith("-"):
                ctx = ("foreign", head)
        for t in toks[i + 1 if ctx else i:]:
            if t == "--":
                after_dd = True
                continue
            m = re.match(r"^\[?(--[a-z][a-z0-9-]*)", t)
            if not m:
                continue
            flag = m.group(1)
            if ctx is None:
                text, where = all_flags_text(), "any --help or script"
            elif ctx[0] == "app":
                app_has_dd = "--" in toks
                if app_has_dd and not after_dd:
                    text, where = eal_help(), "EAL's options"
                else:
                    text = help_text(ctx[1])
                    where = f"wharf-{ctx[1]} --help"
                    if text is None:
                        report(doc, line, "flag", flag, f"build/wharf-{ctx[1]} is not built")
                        continue
            elif ctx[0] == "script":
                text, where = SCRIPTS[ctx[1]], ctx[1]
            else:
                continue
            seen("flag", f"{flag} ({where})")
            if not flag_in(flag, text):
                report(doc, line, "flag", flag, "not in " + where)


def check_names(doc, line, text, code):
    for name in re.findall(r"(?<![A-Za-z0-9_$])[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+(?![A-Za-z0-9_])",
                           text):
        # An enum's or macro's tail counts (FIN_WAIT_1 is TL_FIN_WAIT_1 in the code).
        seen("name", name)
        if not in_source(name, prefixed=True) and not in_dpdk_headers(name):
            report(doc, line, "name", name, "not in the sources")
    if code:
        for tok in re.findall(r"(?<![A-Za-z0-9_./-])[a-z][a-z0-9]*_[a-z0-9_]*[a-z0-9]"
                              r"(?=\(\)|[\s,;:]|$)", text):
            seen("identifier", tok)
            if re.fullmatch(r"t_[a-z0-9_]+", tok):
                if not os.path.exists(os.path.join(ROOT, "testbed/tests", tok + ".sh")):
                    report(doc, line, "test", tok, "no testbed/tests/" + tok + ".sh")
            elif re.fullmatch(r"test_[a-z0-9_]+", tok) and tok + ".c" in BASENAMES:
                continue
            elif not in_source(tok) and not in_dpdk_headers(tok):
                report(doc, line, "identifier", tok, "not in the sources")
    for cmd in re.findall(r"/wharf/[a-z]+/[a-z_]+", text):
        seen("telemetry command", cmd)
        if not in_source(cmd):
            report(doc, line, "telemetry command", cmd, "not registered in the sources")


def anchors(doc):
    """The ids GitHub gives a Markdown file's headings."""
    out = set()
    for h in re.findall(r"^#+\s+(.*)$", re.sub(r"```.*?```", "", read(doc), flags=re.S), re.M):
        slug = re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-")
        out.add(slug)
    return out


def check_json_keys(doc, line, cell):
    for key in re.findall(r"(?<![A-Za-z0-9_.])[a-z][a-z0-9_]*(?:\.[a-z][a-z0-9_]*)*", cell):
        seen("JSON key", key)
        for part in key.split("."):
            if '"%s"' % part not in SOURCE:
                report(doc, line, "JSON key", key, f"no \"{part}\" in the sources")
                break


def check_doc(doc):
    text = read(doc)
    path = os.path.join(ROOT, doc)
    columns = None  # the header cells of the table being read
    for line, kind, piece in doc_pieces(text):
        cells = None
        if kind == "prose":
            if piece.lstrip().startswith("|"):
                cells = [c.strip() for c in piece.strip().strip("|").split("|")]
                if columns is None:
                    columns = [c.lower() for c in cells]
                    cells = None
                elif all(re.fullmatch(r":?-+:?", c) for c in cells if c):
                    cells = None
            else:
                columns = None
            for m in re.finditer(r"\[[^\]]*\]\(([^)#\s]*)(?:#([^)\s]*))?\)", piece):
                target, anchor = m.group(1), m.group(2)
                if re.match(r"^[a-z]+:", target):
                    continue
                rel = os.path.normpath(os.path.join(os.path.dirname(doc), target)) if target \
                    else doc
                seen("link", rel + ("#" + anchor if anchor else ""))
                if rel not in FILES and rel not in DIRS:
                    report(path, line, "link", target, "not in the tree")
                elif anchor and rel.endswith(".md") and anchor not in anchors(rel):
                    report(path, line, "link", f"{target}#{anchor}", "no such heading there")
            # In a table with a "flag" column (the README's knobs), that column's flags are
            # the cluster executables'; a "JSON key" column's keys must be the file's.
            parts = [(c, columns[i] if columns and i < len(columns) else "")
                     for i, c in enumerate(cells)] if cells else [(piece, "")]
            for cell, col in parts:
                knob = col == "flag" or col.startswith("flag ")
                if "json" in col:
                    check_json_keys(path, line, cell)
                for m in re.finditer(r"(?<![A-Za-z0-9-])--[a-z][a-z0-9-]*", cell):
                    text_ = help_text("train") if knob else all_flags_text()
                    seen("flag", m.group(0) + (" (wharf-train --help)" if knob else " (any)"))
                    if not flag_in(m.group(0), text_):
                        report(path, line, "flag", m.group(0), "not in " + (
                            "wharf-train --help" if knob else "any --help or script"))
            check_names(path, line, piece, False)
        else:
            if kind == "span" and " " not in piece.strip():
                check_path(path, line, piece)
            else:
                for tok in piece.split():
                    check_path(path, line, tok)
            check_command(path, line, piece)
            check_names(path, line, piece, True)
        m = OUTSIDE_RE.search(piece)
        if m:
            report(path, line, "reference", m.group(0), "points outside the repository")
        if re.search(r"\b[Ss]ession\s+\d+|\bsince session\b", piece):
            report(path, line, "history", re.search(r"[Ss]ession[\s\d]*", piece).group(0).strip(),
                   "the docs describe the code; git log holds the history")


for d in DOCS:
    check_doc(d)
for f in FILES:
    if f.endswith(".md") or f.startswith("fuzz/corpus/"):
        continue
    for n, line in enumerate(read(f).split("\n"), 1):
        m = OUTSIDE_RE.search(line)
        if m:
            report(os.path.join(ROOT, f), n, "reference", m.group(0),
                   "points outside the repository")

for p in problems:
    print(p)
if VERBOSE:
    for kind in sorted(checked):
        print(f"{kind}: " + ", ".join(sorted(checked[kind])))
counts = ", ".join(f"{len(v)} {k}s" for k, v in sorted(checked.items()))
print(f"docs_check: {len(DOCS)} documents, {counts} checked; {len(problems)} missing")
sys.exit(1 if problems else 0)
