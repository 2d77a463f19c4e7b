"""kbtree -- what the KernelBench scripts share: finding a checkout's level
folders, ordering its problem files, and importing its own package.

KernelBench's package (src/kernelbench) imports dotenv, openai, litellm,
tqdm, requests and pydantic at module level; its eval and timing code use
none of them but pydantic's BaseModel (as a plain record).  stub_imports()
puts stand-ins in sys.modules for those missing, so its harness runs in a
Python with torch alone.  KernelBench's files are read where the user put
them; none is shipped.
"""
import copy
import os
import re
import sys
import types


def levels_root(kb):
    """The folder holding level1/, level2/, ... or None."""
    for cand in (os.path.join(kb, "KernelBench"), kb):
        if os.path.isdir(os.path.join(cand, "level1")):
            return cand
    return None


def problem_key(name):
    """KernelBench's file names start with their problem id: 12_Foo.py."""
    m = re.match(r"(\d+)_", name)
    return (int(m.group(1)) if m else 1 << 30, name)


class _BaseModel:
    # pydantic's BaseModel as KernelBench's eval.py uses it: fields with defaults.
    def __init__(self, **kw):
        for cls in reversed(type(self).__mro__):
            for k in getattr(cls, "__annotations__", {}):
                if hasattr(cls, k):
                    setattr(self, k, copy.deepcopy(getattr(cls, k)))
        for k, v in kw.items():
            setattr(self, k, v)


def _stub(name, **attrs):
    try:
        __import__(name)
        return
    except Exception:
        pass
    m = types.ModuleType(name)
    for k, v in attrs.items():
        setattr(m, k, v)
    sys.modules[name] = m


def stub_imports():
    """Stand-ins for the packages KernelBench imports and its harness never
    uses, where they are missing."""
    _stub("dotenv", load_dotenv=lambda *a, **k: None)
    _stub("openai", OpenAI=object)
    _stub("litellm", completion=lambda *a, **k: None)
    _stub("tqdm", tqdm=lambda it=None, *a, **k: it)
    _stub("requests")
    _stub("pydantic", BaseModel=_BaseModel)
