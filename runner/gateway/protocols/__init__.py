"""The wire APIs the gateway speaks: reading each one's replies, and translating between them.

Pure functions and small stream state machines over JSON-shaped dicts: no I/O, no HTTP client, no SDK.

- ``api``: ``Api``, ``TranslationError``, and ``StreamTranslator``: every stream translator's ``feed(event, data)``
  and ``close()``, each giving ``(event name, data)`` pairs (chat completions' events have the name ``""``).
- ``reply``: ``Reader``, what every API's reader shares: one reply read once, from a body or a stream's events, into
  its figures (usage, the model id, whether the stream ended, an in-stream error) and the reply put together.
- ``chat``, ``messages``, ``responses``, ``gemini``: one module per API: its reader, and its usage read and
  written. ``chat`` also holds the chat-completions shapes the other APIs' translations build, and
  ``FromChatStream``, what the translators from a chat-completions stream share.
- ``readers``: the reader of each API (``reader_for``).
- ``chat_messages``: Chat Completions ⇄ Anthropic Messages, requests, responses and streams.
- ``chat_responses``: Responses → Chat Completions requests; Chat Completions → Responses responses and streams.
- ``chat_gemini``: Gemini → Chat Completions requests; Chat Completions → Gemini responses and streams.

Chat Completions is the pivot: a Messages, Responses or Gemini agent talking to a chat provider is translated to chat
and back; a chat agent talking to an Anthropic provider is translated to Messages and back. A new API is one module
(its reader and usage), one line in ``readers``, and its translation to and from chat.
"""

from runner.gateway.protocols.api import Api, StreamEvent, StreamTranslator, TranslationError
from runner.gateway.protocols.chat_messages import (
    ChatStreamToMessages,
    MessagesStreamToChat,
    chat_to_messages_request,
    chat_to_messages_response,
    messages_to_chat_request,
    messages_to_chat_response,
)
from runner.gateway.protocols.chat_responses import (
    ChatStreamToResponses,
    chat_to_responses_response,
    responses_to_chat_request,
)
from runner.gateway.protocols.readers import reader_for
from runner.gateway.protocols.reply import Reader

__all__ = [
    "Api",
    "ChatStreamToMessages",
    "ChatStreamToResponses",
    "MessagesStreamToChat",
    "Reader",
    "StreamEvent",
    "StreamTranslator",
    "TranslationError",
    "chat_to_messages_request",
    "chat_to_messages_response",
    "chat_to_responses_response",
    "messages_to_chat_request",
    "messages_to_chat_response",
    "reader_for",
    "responses_to_chat_request",
]
