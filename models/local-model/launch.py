"""Starts llama.cpp's HTTP server (the xllamacpp wheel) on 127.0.0.1 for `skills-agent model start`.

Usage: launch.py MODEL.gguf CHAT_TEMPLATE.jinja PORT [N_CTX]
Serves /v1/chat/completions, /v1/messages, /tokenize and /health until SIGTERM or SIGINT.
Two slots share N_CTX tokens of context (default 8192). SKILLS_AGENT_SPECULATIVE=ngram-simple,
ngram-map-k, ngram-map-k4v, ngram-mod or ngram-cache turns on llama.cpp's n-gram speculative
decoding of that kind (drafts looked up in the context, no second model); unset or `none`: off.

The slots' caches outlive the server: on SIGTERM or SIGINT each slot that holds a prompt is
saved (llama.cpp's slot save, under `slots/` beside the chat template, named after the model
file), and the next start restores them, so the first request after a restart finds its prompt
prefix (the system prompt and skill catalog of the last runs) already evaluated. The line
"ready: slots restored" on stdout says the restores are over and requests may come.
"""

import json
import os
import signal
import sys
import urllib.request

import xllamacpp

READY = "ready: slots restored"


def main() -> None:
    model_path, template_path, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
    n_ctx = int(sys.argv[4]) if len(sys.argv) > 4 else 8192
    # Block the stop signals first so sigwait below receives them instead of the default action.
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGINT})
    params = xllamacpp.CommonParams()
    params.model.path = model_path
    params.hostnames = ["127.0.0.1"]
    params.port = port
    params.n_parallel = 2
    params.n_ctx = n_ctx  # shared by the two slots
    threads = os.cpu_count() or 2
    params.cpuparams.n_threads = threads
    params.cpuparams_batch.n_threads = threads
    params.use_jinja = True
    # The model writes tool calls as a bare JSON object; this template asks for exactly that and
    # renders earlier calls the same way, so llama.cpp's parser recognises them.
    with open(template_path, encoding="utf-8") as template:
        params.chat_template = template.read()
    speculative = os.environ.get("SKILLS_AGENT_SPECULATIVE", "none")
    if speculative != "none":
        kind = "COMMON_SPECULATIVE_TYPE_" + speculative.upper().replace("-", "_")
        if not speculative.startswith("ngram-") or not hasattr(xllamacpp.common_speculative_type, kind):
            sys.exit(f"SKILLS_AGENT_SPECULATIVE={speculative}: not an n-gram kind (ngram-simple, ngram-map-k, ngram-map-k4v, ngram-mod, ngram-cache)")
        params.speculative.types = [getattr(xllamacpp.common_speculative_type, kind)]
        print(f"speculative decoding: {speculative}", flush=True)
    slots_dir = os.path.join(os.path.dirname(os.path.abspath(template_path)), "slots")
    os.makedirs(slots_dir, exist_ok=True)
    params.slot_save_path = slots_dir + os.sep  # llama.cpp joins it and the file name as given
    server = xllamacpp.Server(params)
    print(f"listening on {server.listening_address}", flush=True)
    for slot in range(params.n_parallel):
        restore(port, slots_dir, slot, slot_file(model_path, slot))
    # /health answers before the restores end; `model start` waits for this line as well, so no
    # request reaches a slot that a restore then overwrites (its prompt found nothing cached).
    print(READY, flush=True)
    signal.sigwait({signal.SIGTERM, signal.SIGINT})
    print("stopping", flush=True)
    for slot in range(params.n_parallel):
        save(port, slots_dir, slot, slot_file(model_path, slot))
    os._exit(0)


def slot_file(model_path: str, slot: int) -> str:
    """The saved cache of `slot` for this model file (its name and size: another model's cache
    has another layout)."""
    return f"{os.path.basename(model_path)}-{os.path.getsize(model_path)}-slot{slot}.bin"


def slot_action(port: int, slot: int, action: str, filename: str) -> dict:
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/slots/{slot}?action={action}",
        data=json.dumps({"filename": filename}).encode(),
        headers={"content-type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=120) as response:
        return json.load(response)


def restore(port: int, slots_dir: str, slot: int, filename: str) -> None:
    """Restores a saved slot; a file that does not load (another build's layout) is removed."""
    if not os.path.exists(os.path.join(slots_dir, filename)):
        return
    try:
        result = slot_action(port, slot, "restore", filename)
        print(f"slot {slot}: restored {result.get('n_restored', 0)} tokens", flush=True)
    except Exception as error:  # noqa: BLE001 - a cache that does not load is only a cold start
        print(f"slot {slot}: cannot restore {filename} ({error}); removed", flush=True)
        os.remove(os.path.join(slots_dir, filename))


def save(port: int, slots_dir: str, slot: int, filename: str) -> None:
    """Saves a slot that holds tokens; an empty one leaves no file."""
    path = os.path.join(slots_dir, filename)
    try:
        saved = slot_action(port, slot, "save", filename).get("n_saved", 0)
    except Exception as error:  # noqa: BLE001 - the server stops either way
        print(f"slot {slot}: cannot save ({error})", flush=True)
        saved = 0
    if saved:
        print(f"slot {slot}: saved {saved} tokens", flush=True)
    elif os.path.exists(path):
        os.remove(path)


if __name__ == "__main__":
    main()
