"""Translation between the three LLM APIs the gateway speaks, and reading token usage off each.

Pure functions and small stream state machines over JSON-shaped dicts: no I/O, no HTTP client, no SDK.
Chat Completions is the pivot: a Messages or Responses agent talking to a chat provider is translated to chat
and back; a chat agent talking to an Anthropic provider is translated to Messages and back.

- ``api``: ``Api``, ``TranslationError``, and ``StreamTranslator``: every stream translator's ``feed(event, data)``
  and ``close()``, each giving ``(event name, data)`` pairs (chat completions' events have the name ``""``).
- ``tokens``: ``TokenUsage``, ``usage_of``, ``model_of`` and ``StreamWatch`` (usage off a passing stream).
- ``chat``: the chat-completions shapes both other APIs' translations build, and ``FromChatStream``, what the
  translators from a chat-completions stream share.
- ``chat_messages``: Chat Completions ⇄ Anthropic Messages, requests, responses and streams.
- ``chat_responses``: Responses → Chat Completions requests; Chat Completions → Responses responses and streams.
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
from runner.gateway.protocols.tokens import StreamWatch, TokenUsage, model_of, usage_of

__all__ = [
    "Api",
    "ChatStreamToMessages",
    "ChatStreamToResponses",
    "MessagesStreamToChat",
    "StreamEvent",
    "StreamTranslator",
    "StreamWatch",
    "TokenUsage",
    "TranslationError",
    "chat_to_messages_request",
    "chat_to_messages_response",
    "chat_to_responses_response",
    "messages_to_chat_request",
    "messages_to_chat_response",
    "model_of",
    "responses_to_chat_request",
    "usage_of",
]
