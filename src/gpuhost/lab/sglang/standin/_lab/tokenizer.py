"""Where the benchmark client finds its tokenizer, as SGLang's does it offline.

SGLang's client calls ``get_tokenizer(id)`` → ``AutoTokenizer.from_pretrained(id)`` (sglang 0.5.23
``benchmark/utils.py:44-62``). A directory is read as it is; a repo id is looked up in the Hugging Face cache
only: ``HF_HUB_CACHE``, else ``HF_HOME/hub``, else ``~/.cache/huggingface/hub`` (huggingface_hub
``constants.py``), ``models--ORG--NAME/snapshots/REV/``. With ``HF_HUB_OFFLINE=1`` and no snapshot there,
transformers raises the OSError of ``utils/hub.py:620-623`` (transformers 5.19.0).
"""

from __future__ import annotations

import os

ENDPOINT = "https://huggingface.co"


def hub_cache() -> str:
    if os.environ.get("HF_HUB_CACHE"):
        return os.environ["HF_HUB_CACHE"]
    home = os.environ.get("HF_HOME") or os.path.join(os.path.expanduser("~"), ".cache", "huggingface")
    return os.path.join(home, "hub")


def _has_tokenizer(directory: str) -> bool:
    return any(os.path.isfile(os.path.join(directory, n)) for n in ("tokenizer.json", "tokenizer_config.json"))


def resolve(name: str) -> str:
    """The directory the tokenizer ``name`` loads from; OSError as transformers raises it when there is none."""
    if os.path.isdir(name):
        if _has_tokenizer(name):
            return name
        raise OSError(
            f"Can't load tokenizer for '{name}'. If you were trying to load it from 'https://huggingface.co/models', "
            f"make sure you don't have a local directory with the same name. Otherwise, make sure '{name}' is the "
            "correct path to a directory containing all relevant files for a PreTrainedTokenizerFast tokenizer."
        )
    snapshots = os.path.join(hub_cache(), "models--" + name.replace("/", "--"), "snapshots")
    try:
        revs = sorted(os.listdir(snapshots))
    except OSError:
        revs = []
    for rev in revs:
        if _has_tokenizer(os.path.join(snapshots, rev)):
            return os.path.join(snapshots, rev)
    raise OSError(
        f"We couldn't connect to '{ENDPOINT}' to load the files, and couldn't find them in the"
        " cached files.\nCheck your internet connection or see how to run the library in offline mode at"
        " 'https://huggingface.co/docs/transformers/installation#offline-mode'."
    )
