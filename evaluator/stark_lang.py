"""stark_lang -- which kernel language a solution is written in, and whether
this machine can judge it.

A candidate is CUDA C++ (load_inline, or the fast format's stark_cuda),
Triton, the CuTe DSL (the `cutlass` Python package), TileLang or
ThunderKittens (CUDA C++ that includes its headers).  The language is
declared (`--language`) or read from the source: its imports, its
decorators and, for ThunderKittens, its includes.  The source is parsed,
never run (the referee calls this before any candidate code runs), so a
file that does not parse falls back to a plain text search and the run
stage reports the syntax error as the candidate's.

Each language but CUDA needs a package this machine may lack.  Where it is
missing the evaluation is `error` naming the package and how to install it:
the machine's lack is never the candidate's runtime_error or compile_error.
Whether a package is present is asked of the import system (find_spec), which
locates a package without running it.

  detect(src, declared)     (language, how it was decided)
  missing(lang, device)     None, or the message of the `error`
  languages(device)         {language: None or what is missing} (stark doctor)
"""

import ast
import importlib.util
import os
import re

LANGUAGES = ("cuda", "triton", "cute", "tilelang", "tk")
NAMES = {"cuda": "CUDA C++", "triton": "Triton", "cute": "CuTe DSL",
         "tilelang": "TileLang", "tk": "ThunderKittens"}

# The Python package each language imports, and how to get it.
PACKAGES = {
    "triton": ("triton", "pip install triton (PyTorch's CUDA wheels bring it)"),
    "cute": ("cutlass", "pip install nvidia-cutlass-dsl"),
    "tilelang": ("tilelang", "pip install tilelang"),
}

# ThunderKittens is headers: a folder holding kittens.cuh (its checkout's
# include/), named by THUNDERKITTENS_ROOT (KernelBench's convention) or
# TK_INCLUDE.
TK_HEADER = "kittens.cuh"
TK_VARS = ("THUNDERKITTENS_ROOT", "TK_INCLUDE")

# Top-level modules that mark a language, by import.
_IMPORTS = {"triton": "triton", "cutlass": "cute", "tilelang": "tilelang", "tvm": "tilelang"}
_TK_INCLUDE = re.compile(rb'#\s*include\s*[<"]([^>"]*/)?kittens\.cuh[>"]')
_TEXT_IMPORT = re.compile(rb"^\s*(?:from|import)\s+(triton|cutlass|tilelang)\b", re.M)


def _imports(tree):
    """Top-level module names the source imports, in order, with the line."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.extend((a.name.split(".")[0], node.lineno) for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            out.append((node.module.split(".")[0], node.lineno))
    return out


def _decorators(tree):
    """Decorator names as written (dotted), e.g. triton.jit, cute.kernel."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            for d in node.decorator_list:
                f = d.func if isinstance(d, ast.Call) else d
                parts = []
                while isinstance(f, ast.Attribute):
                    parts.append(f.attr)
                    f = f.value
                if isinstance(f, ast.Name):
                    parts.append(f.id)
                    out.append(".".join(reversed(parts)))
    return out


def detect(src, declared="auto"):
    """(language, how): the declared language, or the one the source's
    imports, decorators and includes show; CUDA where none shows."""
    if isinstance(src, str):
        src = src.encode("utf-8", "surrogateescape")
    if declared and declared != "auto":
        if declared not in LANGUAGES:
            raise ValueError("unknown language '%s'" % declared)
        return declared, "declared"
    if _TK_INCLUDE.search(src):
        return "tk", "includes kittens.cuh"
    try:
        tree = ast.parse(src)
    except (SyntaxError, ValueError):
        m = _TEXT_IMPORT.search(src)
        if m:
            mod = m.group(1).decode()
            return _IMPORTS[mod], "imports %s (source does not parse)" % mod
        return "cuda", "no other language's import (source does not parse)"
    seen = {}
    for mod, line in _imports(tree):
        lang = _IMPORTS.get(mod)
        if lang and lang not in seen:
            seen[lang] = "imports %s (line %d)" % (mod, line)
    decos = _decorators(tree)
    marks = {"triton": ("triton.jit", "triton.autotune", "jit", "autotune"),
             "cute": ("cute.kernel", "cute.jit"),
             "tilelang": ("tilelang.jit", "T.prim_func", "tilelang.lazy_jit")}
    for lang in ("triton", "cute", "tilelang"):
        if lang in seen:
            hit = [d for d in decos if d in marks[lang]]
            why = seen[lang] + (", @%s" % hit[0] if hit else "")
            return lang, why
    return "cuda", "no other language's import"


def tk_include(environ=None):
    """The folder holding kittens.cuh, or None."""
    environ = os.environ if environ is None else environ
    for var in TK_VARS:
        root = environ.get(var)
        if not root:
            continue
        for sub in ("include", "."):
            if os.path.isfile(os.path.join(root, sub, TK_HEADER)):
                return os.path.normpath(os.path.join(root, sub))
    return None


def _have(module):
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def missing(lang, device="cuda", environ=None):
    """None where this machine has what lang needs, else the `error`
    message (what is missing and how to get it)."""
    if lang == "cuda":
        return None
    if lang in ("triton", "cute", "tilelang", "tk") and not str(device).startswith("cuda"):
        return ("a %s candidate needs a GPU: %s kernels run on CUDA devices only "
                "(--device cuda)" % (NAMES[lang], NAMES[lang]))
    if lang == "tk":
        if tk_include(environ) is None:
            return ("this machine lacks the ThunderKittens headers (%s) that a "
                    "ThunderKittens candidate includes: clone "
                    "https://github.com/HazyResearch/ThunderKittens and set "
                    "THUNDERKITTENS_ROOT to it" % TK_HEADER)
        return None
    module, how = PACKAGES[lang]
    if not _have(module):
        return ("this machine lacks the Python package '%s' that a %s candidate "
                "imports: %s" % (module, NAMES[lang], how))
    return None


def languages(device="cuda", environ=None):
    """{language: None, or what is missing} for stark doctor."""
    return {lang: missing(lang, device, environ) for lang in LANGUAGES}
