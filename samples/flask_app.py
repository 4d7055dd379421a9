"""A Flask app that serves the quickstart assistant, streaming each run as Server-Sent Events.

    python samples/flask_app.py            # http://127.0.0.1:5000/?q=weather+in+Oslo
    curl -N 'http://127.0.0.1:5000/chat?q=What+is+6*7'

Each request runs the agent in the request's own thread (no asyncio needed); a client that
disconnects cancels its run. Offline by default, live with ``OPENAI_API_KEY``.
"""

from __future__ import annotations

import html
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from flask import Flask, Response, request
from quickstart import build_agent

from agentkit import Runner
from agentkit.integrations.flask import sse_response

PAGE = """<!doctype html>
<title>agentkit</title>
<h1>agentkit over SSE</h1>
<p>Question: <b>{question}</b></p>
<pre id="out"></pre>
<script>
const out = document.getElementById("out");
const source = new EventSource("/chat?q=" + encodeURIComponent({question_json}));
source.addEventListener("token", e => {{ out.textContent += JSON.parse(e.data).content; }});
source.addEventListener("agent", e => {{
  const event = JSON.parse(e.data);
  if (event.output && event.output.role === "tool") {{
    const result = event.output.message.content;
    out.textContent += "\\n[" + event.output.tool_name + "] " + result + "\\n";
  }}
}});
source.addEventListener("done", () => source.close());
</script>
"""


def create_app(runner: Runner | None = None) -> Flask:
    """The app; one Runner (and one agent) serves every request thread."""
    app = Flask(__name__)
    shared = runner or Runner(build_agent(), enable_streaming=True)

    @app.get("/")
    def index() -> str:
        question = request.args.get("q", "What's the weather in Paris, and what is 17 * 23?")
        import json

        return PAGE.format(question=html.escape(question), question_json=json.dumps(question))

    @app.get("/chat")
    def chat() -> Response:
        question = request.args.get("q", "").strip()
        if not question:
            return Response("pass the question as ?q=...\n", status=400, mimetype="text/plain")
        return sse_response(shared.query(question), stream_tokens=True)

    return app


if __name__ == "__main__":
    create_app().run(host="127.0.0.1", port=int(os.environ.get("PORT", "5000")), threaded=True)
