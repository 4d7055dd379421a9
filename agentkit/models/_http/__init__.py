"""What the HTTP chat models share: the transport, deadlines, aborts, body caps, retries, limits.

:class:`~agentkit.models.OpenAIChatModel`, :class:`~agentkit.models.AnthropicChatModel`,
:class:`~agentkit.models.GeminiChatModel` and :class:`~agentkit.models.OpenAIResponsesModel`
are one :class:`_model.HTTPChatModel` each, over one wire of their own:

* ``_transport``: total deadlines and aborts at the socket level, under a public httpx transport;
* ``_body``: reading a body within the deadline and ``max_response_bytes``;
* ``_retry``: what is retried, how long a server asks to wait, what an error status means;
* ``_limits``: ``concurrency=`` and ``rate_limit=``;
* ``_sse``: Server-Sent Events;
* ``_stream``: one call's state and the reading of a streamed reply (the wire reads the events);
* ``_model``: the model class itself (attempts, retries, cancel, pricing), whose subclasses
  encode the request and decode the reply.
"""

__all__: list[str] = []
