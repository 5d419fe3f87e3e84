"""Starts llama.cpp's HTTP server (the xllamacpp wheel) on 127.0.0.1 for `skills-agent model start`.

Usage: launch.py MODEL.gguf CHAT_TEMPLATE.jinja PORT [N_CTX]
Serves /v1/chat/completions, /v1/messages, /tokenize and /health until SIGTERM or SIGINT.
Two slots share N_CTX tokens of context (default 8192). SKILLS_AGENT_SPECULATIVE=ngram-simple,
ngram-map-k, ngram-map-k4v, ngram-mod or ngram-cache turns on llama.cpp's n-gram speculative
decoding of that kind (drafts looked up in the context, no second model); unset or `none`: off.
"""

import os
import signal
import sys

import xllamacpp


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
    server = xllamacpp.Server(params)
    print(f"listening on {server.listening_address}", flush=True)
    signal.sigwait({signal.SIGTERM, signal.SIGINT})
    print("stopping", flush=True)
    os._exit(0)


if __name__ == "__main__":
    main()
