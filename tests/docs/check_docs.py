#!/usr/bin/python3
"""check_docs.py - runs the examples of README.md and docs/API.md and compares the answers.

    tests/docs/check_docs.py [README.md docs/API.md ...]   (from the repository root; make test runs it)

Each document runs against worlds of its own, each a fresh copy of the world `make run`
serves: a private redis-server on a free loopback port seeded with the fixture
scripts/run.sh seeds (--reset) and the flash sale it creates (its `market-seed --sale`
spec, read from scripts/run.sh), and a market-server on a free loopback port with
authentication on, its secret in var/auth-secret of a temporary folder that is the
working directory of every example (bin/ there is the programs' folder).

THE CONVENTION. In an indented code block (four spaces; fenced blocks are not read):
  - A line `$ COMMAND` is an example; a COMMAND line ending in `\\` goes on on the next
    line. It runs in bash (`set -a`, so the variables it sets are there for the examples
    after it), with `localhost:8080` (or 127.0.0.1:8080) replaced by the world's server
    and `-p 6380` by its Redis, and trade ids the document showed earlier replaced by
    the ones the service gave (see MASKS).
  - The lines after it, up to a blank line or the next `$` line, are its answer. An
    answer that starts with `HTTP/` is curl -i's: the status line and headers, a blank
    line, then the body (up to the next blank line). Otherwise it is the body alone.
  - A note at the end of an answer line, after two or more spaces, in parentheses, is
    not part of the answer: `(404)` is the status curl must see (without a note or a
    status line, any 2xx), any other note is a comment for the reader.
  - A command without an answer must succeed (exit 0, and a 2xx if it runs curl); its
    output is not compared.
  - A command whose shell comment begins `# not run:` is skipped, with its answer; the
    comment says why. Keep these few.
  - Directives, in HTML comments (so the page does not show them; the prose beside them
    says the same for the reader):
      <!-- doctest world: FLAGS -->  from here on, a fresh world whose market-server
                                     also gets FLAGS (--no-auth turns authentication off;
                                     --auth-secret S replaces the secret);
      <!-- doctest aside: FLAGS -->  the next example alone runs on a fresh world of its
                                     own with FLAGS; the world before goes on after it.
    A document's first example starts a world without extra flags unless a directive did.

COMPARING. A body that starts with `{` or `[` is compared as JSON, key order included
(the service's order, as the document shows it), and types exact. In the document:
  - the value "..." stands for any value; a bare `...` member of an object or element of
    an array stands for any members or elements there (README.md elides what is long);
MASKS (what differs from run to run, by pattern or key name):
  - a string like a trade id, `<13 digits>-<seq>`, matches any such string; the first time
    a document's id meets the service's, the pair is kept: the same document id must meet
    the same service id after that (and no other), and commands have it replaced;
  - the values of the keys `fence`, `time_ms`, `ends_ms`, `made_ms`, `expires_ms` and
    `closed_ms` match any integer;
  - the world's addresses in what a command prints read as make run's: 127.0.0.1:8080
    for the server, 127.0.0.1:6380 for its Redis;
  - the headers Date and X-Request-Id are not shown and not compared; Content-Length
    must equal the length of the body the document shows, and the service's value when
    nothing in the answer was masked or rewritten;
  - in a text answer (not JSON), a line ending in `...` matches any line it begins.
The headers a document shows must be exactly those the service sends (but the two above).
Also: every curl command scripts/run.sh prints for the user to try is one of README's.
It prints cmocka's summary lines (one test per example), which tests/run.sh counts.
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "helpers"))
from market_world import ROOT, SEED, Checks, World  # noqa: E402

DOCS = ("README.md", os.path.join("docs", "API.md"))
TRADE_ID = re.compile(r"^\d{13}-\d+$")
TRADE_ID_IN_TEXT = re.compile(r"(?<![\d-])\d{13}-\d+(?![\d-])")
MASKED_INTS = ("fence", "time_ms", "ends_ms", "made_ms", "expires_ms", "closed_ms")
UNSHOWN_HEADERS = ("date", "x-request-id")
ELIDED = "\u2026elided\u2026"  # a bare ... of the document, once parsed
NOTE = re.compile(r"^(.*?\S)\s{2,}\(([^()]*)\)\s*$")
STATUS_MARK = "@@doctest-status "
CHECKS = Checks()


# ---- reading the documents ----

class Example:
    def __init__(self, doc, line, command, answer, world, aside):
        self.doc, self.line, self.command, self.answer = doc, line, command, answer
        self.world, self.aside = world, aside  # the FLAGS of a world directive, or None

    def name(self):
        first = self.command.split("\n", 1)[0]
        return f"{self.doc}:{self.line} $ {first[:90]}"


def read_examples(doc):
    """Returns the examples of doc (a path under ROOT), in document order."""
    with open(os.path.join(ROOT, doc), encoding="utf-8") as f:
        lines = f.read().split("\n")
    out, world, aside, fenced, i = [], [], None, False, 0
    while i < len(lines):
        line = lines[i]
        if line.lstrip().startswith("```"):
            fenced = not fenced
            i += 1
            continue
        m = re.match(r"^\s*<!-- doctest (world|aside):(.*?)-->\s*$", line)
        if m and not fenced:
            flags = m.group(2).split()
            if m.group(1) == "world":
                world = flags
            else:
                aside = flags
            i += 1
            continue
        if fenced or not line.startswith("    ") or not line.strip().startswith("$ "):
            i += 1
            continue
        start = i + 1
        indent = len(line) - len(line.lstrip())
        cmd = [line.strip()[2:]]
        while cmd[-1].endswith("\\") and i + 1 < len(lines):
            i += 1
            cmd.append(lines[i].strip())
        i += 1
        answer = []
        while i < len(lines):
            text = lines[i]
            if text.strip() == "":
                # curl -i: the blank line after the headers, then the body
                if answer and answer[0].startswith("HTTP/") and "" not in answer and \
                        i + 1 < len(lines) and lines[i + 1].startswith(" " * indent) and \
                        lines[i + 1].strip() and not lines[i + 1].strip().startswith("$ "):
                    answer.append("")
                    i += 1
                    continue
                break
            if not text.startswith(" " * indent) or text.strip().startswith("$ "):
                break
            answer.append(text[indent:].rstrip())
            i += 1
        out.append(Example(doc, start, "\n".join(cmd), answer, world, aside))
        world, aside = None, None
    return out


# ---- comparing ----

def parse_expected_json(text):
    """The document's JSON, with a bare ... turned into ELIDED (a member or an element).
    Objects become Obj, lists of (key, value) pairs, so that order and duplicates show."""
    out, stack, in_str, esc, i = [], [], False, False, 0
    while i < len(text):
        c = text[i]
        if in_str:
            out.append(c)
            if esc:
                esc = False
            elif c == "\\":
                esc = True
            elif c == '"':
                in_str = False
        elif text.startswith("...", i):
            out.append(json.dumps(ELIDED) + (": null" if stack and stack[-1] == "{" else ""))
            i += 3
            continue
        else:
            if c == '"':
                in_str = True
            elif c in "{[":
                stack.append(c)
            elif c in "}]":
                stack.pop()
            out.append(c)
        i += 1
    return json.loads("".join(out), object_pairs_hook=Obj)


class Obj(list):
    """A JSON object, as its (key, value) pairs in order."""


class Mismatch(AssertionError):
    pass


class Ids:
    """The trade ids a document showed, each paired with the service's."""

    def __init__(self):
        self.doc_to_real, self.real_to_doc = {}, {}

    def pair(self, doc_id, real_id, where):
        known = self.doc_to_real.get(doc_id)
        if known is None and real_id in self.real_to_doc:
            raise Mismatch(f"{where}: the service's {real_id} was shown as "
                           f"{self.real_to_doc[real_id]} before, here as {doc_id}")
        if known is not None and known != real_id:
            raise Mismatch(f"{where}: {doc_id} was the service's {known} before, here it is {real_id}")
        self.doc_to_real[doc_id] = real_id
        self.real_to_doc[real_id] = doc_id

    def substitute(self, text):
        return TRADE_ID_IN_TEXT.sub(lambda m: self.doc_to_real.get(m.group(0), m.group(0)), text)


def compare_json(exp, act, ids, path="$", masked=None):
    """Raises Mismatch where act (a parsed answer) is not what exp (the document's) shows."""
    if exp == "...":
        masked.append(path)
        return
    if isinstance(exp, Obj):
        if not isinstance(act, Obj):
            raise Mismatch(f"{path}: an object in the document, {show(act)} in the answer")
        compare_object(exp, act, ids, path, masked)
        return
    if isinstance(exp, list):
        if not isinstance(act, list) or isinstance(act, Obj):
            raise Mismatch(f"{path}: an array in the document, {show(act)} in the answer")
        if ELIDED in exp:
            k = exp.index(ELIDED)
            head, tail = exp[:k], exp[k + 1:]
            if ELIDED in tail:
                raise Mismatch(f"{path}: the document elides twice in one array")
            if len(act) < len(head) + len(tail):
                raise Mismatch(f"{path}: {len(act)} elements, the document shows more")
            pairs = list(zip(head, act)) + list(zip(tail, act[len(act) - len(tail):]))
            masked.append(path)
        else:
            if len(act) != len(exp):
                raise Mismatch(f"{path}: {len(act)} elements in the answer, {len(exp)} in the document: "
                               f"{show(act)}")
            pairs = list(zip(exp, act))
        for n, (e, a) in enumerate(pairs):
            compare_json(e, a, ids, f"{path}[{n}]", masked)
        return
    if isinstance(exp, str) and TRADE_ID.match(exp):
        if not isinstance(act, str) or not TRADE_ID.match(act):
            raise Mismatch(f"{path}: a trade id in the document, {show(act)} in the answer")
        ids.pair(exp, act, path)
        if exp != act:
            masked.append(path)
        return
    if type(exp) is not type(act) or exp != act:
        raise Mismatch(f"{path}: the document shows {show(exp)}, the service answers {show(act)}")


def compare_object(exp, act, ids, path, masked):
    j, skipping = 0, False
    for key, value in exp:
        if key == ELIDED:
            skipping = True
            masked.append(path)
            continue
        keys = [k for k, _ in act]
        if skipping:
            if key not in keys[j:]:
                raise Mismatch(f"{path}: no {key!r} after {keys[:j]} in the answer's keys {keys}")
            j = keys.index(key, j)
        elif j >= len(act) or act[j][0] != key:
            raise Mismatch(f"{path}: the document's key {key!r} is not the answer's next "
                           f"({keys[j] if j < len(act) else 'none'}); the answer's keys: {keys}")
        skipping = False
        if key in MASKED_INTS:
            if type(value) is not int or type(act[j][1]) is not int:
                raise Mismatch(f"{path}.{key}: an integer, in the document and the answer")
            if value != act[j][1]:
                masked.append(f"{path}.{key}")
        else:
            compare_json(value, act[j][1], ids, f"{path}.{key}", masked)
        j += 1
    if not skipping and j != len(act):
        raise Mismatch(f"{path}: the answer has more: {[k for k, _ in act[j:]]}")


def show(v):
    def plain(x):
        if isinstance(x, Obj):
            return {k: plain(w) for k, w in x}
        if isinstance(x, list):
            return [plain(w) for w in x]
        return x
    return json.dumps(plain(v))[:300]


def compare_text(exp_lines, act_lines, where):
    if len(exp_lines) != len(act_lines):
        raise Mismatch(f"{where}: {len(act_lines)} lines in the answer, {len(exp_lines)} in the "
                       f"document: {act_lines!r}")
    masked = False
    for e, a in zip(exp_lines, act_lines):
        if e.endswith("...") and a.startswith(e[:-3]):
            masked = True
            continue
        if e != a:
            raise Mismatch(f"{where}: the document shows {e!r}, the command printed {a!r}")
    return masked


def split_note(line):
    m = NOTE.match(line)
    return (m.group(1), m.group(2)) if m else (line, None)


def compare_body(exp_lines, act_body, ids):
    """Compares a body; returns whether anything was masked."""
    text = "\n".join(exp_lines)
    if text.startswith("{") or text.startswith("["):
        exp = parse_expected_json(text)
        try:
            act = json.loads(act_body, object_pairs_hook=Obj)
        except ValueError:
            raise Mismatch(f"the answer is not JSON: {act_body[:300]!r}")
        masked = []
        compare_json(exp, act, ids, "$", masked)
        return bool(masked)
    return compare_text(exp_lines, act_body.split("\n") if act_body else [], "body")


def check_answer(ex, out, ids, rewritten=False):
    """Compares what the command printed (out: its stdout, with curl's status mark);
    rewritten: whether the world's addresses in out were rewritten as make run's."""
    status = None
    m = re.search("\n?" + re.escape(STATUS_MARK) + r"(\d+)\n?$", out)
    if m:
        status = int(m.group(1))
        out = out[:m.start()]
    if STATUS_MARK in out:
        raise Mismatch("an example runs curl once")
    out = out.replace("\r\n", "\n")
    answer = [split_note(line) for line in ex.answer]
    notes = [n for _, n in answer if n]
    lines = [t for t, _ in answer]
    want_status = next((int(n) for n in notes if re.fullmatch(r"\d{3}", n)), None)
    if lines and lines[0].startswith("HTTP/"):
        if status is None:
            raise Mismatch("the document shows an HTTP answer, the command ran no curl")
        head_end = lines.index("") if "" in lines else len(lines)
        exp_head, exp_body = lines[:head_end], lines[head_end + 1:]
        act_head, _, act_body = out.partition("\n\n")
        act_head = act_head.split("\n")
        act_body = act_body.rstrip("\n")
        if exp_head[0] != act_head[0]:
            raise Mismatch(f"status line: the document shows {exp_head[0]!r}, the service sent {act_head[0]!r}")
        if want_status is not None and want_status != status:
            raise Mismatch(f"status: the note says {want_status}, the service sent {status}")
        exp_h = [h.split(":", 1) for h in exp_head[1:]]
        act_h = [h.split(":", 1) for h in act_head[1:] if h.split(":", 1)[0].lower() not in UNSHOWN_HEADERS]
        exp_h = {k.strip().lower(): (k.strip(), v.strip()) for k, v in exp_h}
        act_h = {k.strip().lower(): (k.strip(), v.strip()) for k, v in act_h}
        if set(exp_h) != set(act_h):
            raise Mismatch(f"headers: the document shows {sorted(v[0] for v in exp_h.values())}, "
                           f"the service sent {sorted(v[0] for v in act_h.values())}")
        masked = False
        if exp_body:
            masked = compare_body(exp_body, act_body, ids)
        elif act_body:
            raise Mismatch(f"the document shows no body, the service sent {act_body[:200]!r}")
        for key, (name, value) in exp_h.items():
            actual = act_h[key][1]
            if key == "content-length":
                if exp_body and int(value) != len("\n".join(exp_body).encode()):
                    raise Mismatch(f"Content-Length: {value} in the document, whose body has "
                                   f"{len(chr(10).join(exp_body).encode())} bytes")
                if not (masked or rewritten) and value != actual:
                    raise Mismatch(f"Content-Length: the document shows {value}, the service sent {actual}")
            elif value != actual:
                raise Mismatch(f"{name}: the document shows {value!r}, the service sent {actual!r}")
        return
    if status is not None:
        if want_status is None and not 200 <= status < 300:
            raise Mismatch(f"status {status}, and the document shows no (status) note: {out[:300]!r}")
        if want_status is not None and want_status != status:
            raise Mismatch(f"status: the document notes {want_status}, the service sent {status}: {out[:300]!r}")
    elif want_status is not None:
        raise Mismatch("a (status) note on a command that runs no curl")
    compare_body(lines, out.rstrip("\n"), ids)


# ---- running ----

def run_sh_world():
    """(fixture, sale spec, auction spec) that scripts/run.sh seeds."""
    with open(os.path.join(ROOT, "scripts", "run.sh"), encoding="utf-8") as f:
        src = f.read()
    fixture = re.search(r'market-seed"? --reset (\S+)', src)
    sale = re.search(r'market-seed"? --sale (\S+)', src)
    auction = re.search(r'market-seed"? --auction (\S+)', src)
    assert fixture and sale and auction, \
        "scripts/run.sh: no `market-seed --reset FILE`, `--sale SPEC` or `--auction SPEC` found"
    return fixture.group(1), sale.group(1), auction.group(1)


class DocWorld:
    """A world as make run serves it, FLAGS added, and the folder examples run in."""

    def __init__(self, flags):
        fixture, sale, auction = run_sh_world()
        assert fixture == "fixtures/demo.json", f"scripts/run.sh seeds {fixture}; World seeds fixtures/demo.json"
        flags = list(flags)
        secret = os.urandom(16).hex()
        if "--auth-secret" in flags:
            k = flags.index("--auth-secret")
            secret = flags[k + 1]
            del flags[k:k + 2]
        admin = None
        if "--admin-secret" in flags:
            k = flags.index("--admin-secret")
            admin = flags[k + 1]
            del flags[k:k + 2]
        no_auth = "--no-auth" in flags
        if no_auth:
            flags.remove("--no-auth")
        self.dir = tempfile.mkdtemp(prefix="market-docs.")
        os.makedirs(os.path.join(self.dir, "var"))
        with open(os.path.join(self.dir, "var", "auth-secret"), "w") as f:
            f.write(secret)
        os.symlink(os.path.dirname(os.path.abspath(SEED)), os.path.join(self.dir, "bin"))
        self.world = None
        self.world = World(None if no_auth else secret, admin, flags, sale=sale, quick_timeouts=False,
                           auction=auction)

    def run(self, ex, env, ids):
        """Runs ex's command in bash; returns (exit status, stdout, stderr, the new env)."""
        w = self.world
        cmd = ids.substitute(ex.command)
        cmd = re.sub(r"\b(localhost|127\.0\.0\.1):8080\b", f"127.0.0.1:{w.http_port}", cmd)
        cmd = re.sub(r"(\s-p\s+)6380\b", rf"\g<1>{w.redis_port}", cmd)
        envfile = os.path.join(self.dir, ".env")
        script = ("set -a\n"
                  f"curl() {{ command curl --max-time 10 -w '\\n{STATUS_MARK}%{{http_code}}\\n' \"$@\"; }}\n"
                  f"{cmd}\n"
                  f"rc=$?; env -0 > {envfile}; exit $rc\n")
        p = subprocess.run(["bash", "-c", script], cwd=self.dir, env=env, capture_output=True, text=True,
                           timeout=30)
        try:
            with open(envfile, encoding="utf-8") as f:
                new_env = dict(item.split("=", 1) for item in f.read().split("\0") if "=" in item)
            os.unlink(envfile)
        except OSError:  # bash could not even parse the command
            new_env = dict(env)
        for k in ("rc", "_", "SHLVL", "PWD", "OLDPWD"):
            new_env.pop(k, None)
        return p.returncode, p.stdout, p.stderr, new_env

    def unlocalize(self, text):
        """text with the world's addresses written as make run's (127.0.0.1:8080, :6380)."""
        w = self.world
        text = re.sub(rf"\b127\.0\.0\.1:{w.http_port}\b", "127.0.0.1:8080", text)
        return re.sub(rf"\b127\.0\.0\.1:{w.redis_port}\b", "127.0.0.1:6380", text)

    def close(self):
        if self.world:
            self.world.close()
        shutil.rmtree(self.dir, ignore_errors=True)


def base_env():
    keep = ("PATH", "HOME", "LANG", "LC_ALL", "TERM")
    return {k: os.environ[k] for k in keep if k in os.environ}


def run_document(doc):
    examples = read_examples(doc)
    if not examples:
        CHECKS.fail(f"{doc} has examples", "no `$ ` example found")
        return
    ids = Ids()  # per world: a fresh world's trades are new
    world, env = None, base_env()
    skipped = 0
    try:
        for ex in examples:
            if re.search(r"#\s*not run:", ex.command):
                skipped += 1
                print(f"  skipped {ex.name()}")
                continue
            if ex.world is not None or (world is None and ex.aside is None):
                if world:
                    world.close()
                world, env, ids = None, base_env(), Ids()
                world = DocWorld(ex.world or [])
            target = world if ex.aside is None else DocWorld(ex.aside)

            def one(ex=ex, target=target):
                nonlocal env
                rc, out, err, new_env = target.run(ex, env, ids)
                local = out
                out = target.unlocalize(out)
                if not ex.answer:
                    assert rc == 0, f"exit {rc}: {err.strip()[:300]}"
                    if STATUS_MARK in out:
                        m = re.search(re.escape(STATUS_MARK) + r"(\d+)", out)
                        assert 200 <= int(m.group(1)) < 300, f"status {m.group(1)}: {out[:300]!r}"
                else:
                    try:
                        check_answer(ex, out, ids, out != local)
                    except Mismatch as e:
                        raise Mismatch(f"{e}\n  printed: {out.strip()[:600]!r}"
                                       + (f"\n  stderr: {err.strip()[:300]!r}" if err.strip() else ""))
                env = new_env

            try:
                CHECKS.run(ex.name(), one)
            finally:
                if target is not world:
                    target.close()
    except Exception as e:  # a world would not start
        CHECKS.fail(f"{doc}: servers", f"cannot run the examples: {e}")
    finally:
        if world:
            world.close()
    print(f"  {doc}: {len(examples)} examples, {skipped} marked not run")


def run_sh_commands_in_readme():
    """Every curl command scripts/run.sh prints for the user to try is one of README's."""
    with open(os.path.join(ROOT, "scripts", "run.sh"), encoding="utf-8") as f:
        src = f.read()
    msg = re.search(r"^cat <<MSG\n(.*?)^MSG$", src, re.S | re.M)
    assert msg, "scripts/run.sh: no `cat <<MSG` block"
    lines = [re.sub(r"^\$token_line", "", line).strip() for line in msg.group(1).split("\n")]
    printed = [line for line in lines if line.startswith("curl ")]
    assert printed, "scripts/run.sh prints no curl command"

    def norm(cmd):
        cmd = cmd.replace("$url", "localhost:8080").replace("$auth", '-H "Authorization: Bearer $TOKEN" ')
        cmd = cmd.replace("http://localhost:8080", "localhost:8080")
        return " ".join(cmd.replace("\\\n", " ").split())

    readme = {norm(ex.command) for ex in read_examples("README.md")}
    missing = [c for c in printed if norm(c) not in readme]
    assert not missing, f"make run prints commands README.md's walk-through does not run: {missing}"
    print(f"  the {len(printed)} curl commands make run prints are README's")


def main(argv):
    docs = argv[1:] or list(DOCS)
    if "README.md" in docs:
        CHECKS.run("the commands make run prints are in README.md's walk-through", run_sh_commands_in_readme)
    for doc in docs:
        run_document(doc)
    return CHECKS.summary()


if __name__ == "__main__":
    sys.exit(main(sys.argv))
