"""The provider clients' wire on a real loopback server: connection reuse, closed connections, pool limits, bad
endpoints, a given transport, proxies from the environment, and TLS verification."""

from __future__ import annotations

import json
import shutil
import subprocess
import threading
import time
from dataclasses import dataclass

import httpx
import pytest
from fake_provider import FakeProvider, Reply, Seen, Sleeps, fake_provider
from provider_stage import FAST, KEY, chat, completion_body, env, failure, provider

from runner.gateway.model import ClientSettings, ProviderResult
from runner.gateway.providers import BadEndpoint, OpenAIClient, ProviderError

__all__ = ["env", "fake_provider"]  # the imported fixtures are used by name


def kept_alive(env: FakeProvider, first: Reply) -> tuple[list[ProviderResult], Sleeps]:
    sleeps = Sleeps()
    client = OpenAIClient(FAST, sleep=sleeps)
    env.push(first, Reply(body=completion_body(prompt=5)))
    return [client.chat("m", chat()) for _ in range(3)], sleeps


FIRST_REPLIES = pytest.mark.parametrize(
    "first",
    [Reply(body=completion_body(prompt=3)), Reply(body=completion_body(prompt=3), chunked=True)],
    ids=["content-length", "chunked"],
)


@FIRST_REPLIES
def test_keep_alive_answers_each_call_at_once(env: FakeProvider, first: Reply) -> None:
    results, _ = kept_alive(env, first)
    assert [(r.call.usage and r.call.usage.input_tokens, r.call.attempts) for r in results] == [(3, 1), (5, 1), (11, 1)]


@FIRST_REPLIES
def test_keep_alive_reuses_one_connection(env: FakeProvider, first: Reply) -> None:
    _, sleeps = kept_alive(env, first)
    assert (len({seen.peer for seen in env.seen}), sleeps) == (1, [])


@FIRST_REPLIES
def test_a_kept_alive_replys_raw_bytes_are_its_body(env: FakeProvider, first: Reply) -> None:
    results, _ = kept_alive(env, first)
    assert json.loads(results[0].raw) == results[0].body


def after_a_closed_connection(env: FakeProvider, ending: str) -> tuple[ProviderResult, ProviderResult, Sleeps]:
    sleeps = Sleeps()
    client = OpenAIClient(FAST, sleep=sleeps)
    env.push(Reply(body=completion_body(prompt=3), **{ending: True}), Reply(body=completion_body(prompt=5)))
    first = client.chat("m", chat())
    time.sleep(0.1)  # the fake's FIN reaches us: the idle connection is readable, so it is not reused
    return first, client.chat("m", chat()), sleeps


ENDINGS = pytest.mark.parametrize("ending", ["close", "hangup"])


@ENDINGS
def test_a_reply_that_closes_its_connection_is_read_whole(env: FakeProvider, ending: str) -> None:
    [first] = after_a_closed_connection(env, ending)[:1]
    assert first.call.usage is not None and first.call.usage.input_tokens == 3


@ENDINGS
def test_a_closed_connection_is_replaced_without_a_retry(env: FakeProvider, ending: str) -> None:
    _, second, sleeps = after_a_closed_connection(env, ending)
    assert (second.call.usage and second.call.usage.input_tokens, second.call.attempts, sleeps) == (5, 1, [])


@ENDINGS
def test_a_closed_connection_is_not_reused(env: FakeProvider, ending: str) -> None:
    after_a_closed_connection(env, ending)
    assert len({seen.peer for seen in env.seen}) == 2


@dataclass(frozen=True)
class PoolLimit:
    """A second call while the only connection serves a slow one, then a third once it is free."""

    waited: ProviderError
    """The second call's error."""
    after: ProviderResult
    """The third call's result."""


@pytest.fixture(scope="module")
def pool_limit() -> PoolLimit:
    settings = ClientSettings(max_connections=1, pool_timeout=0.05, max_attempts=2, read_timeout=5)
    with provider(Reply(body=completion_body(prompt=9), delay=0.5)) as fake:
        client = OpenAIClient(settings, sleep=Sleeps())
        slow = threading.Thread(target=client.chat, args=("m", chat()))
        slow.start()
        while not fake.seen:  # the only connection is busy with the slow call
            time.sleep(0.005)
        waited = failure(lambda: client.chat("m", chat()))
        slow.join()
        return PoolLimit(waited, client.chat("m", chat()))


def test_pool_limit_waits_then_times_out(pool_limit: PoolLimit) -> None:
    err = pool_limit.waited
    assert (err.kind, err.retryable, err.attempts) == ("timeout", True, 2)


def test_a_pool_timeout_says_so(pool_limit: PoolLimit) -> None:
    assert "PoolTimeout" in pool_limit.waited.message


def test_a_pool_slot_comes_back_after_its_call(pool_limit: PoolLimit) -> None:
    assert pool_limit.after.call.attempts == 1


def injected_key(monkeypatch: pytest.MonkeyPatch) -> BadEndpoint:
    monkeypatch.setenv("OPENAI_API_KEY", KEY + "\r\nx-injected: 1")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    with pytest.raises(BadEndpoint) as info:
        OpenAIClient(FAST)
    return info.value


def test_a_key_that_would_inject_a_header_fails_at_construction_naming_its_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert "OPENAI_API_KEY" in str(injected_key(monkeypatch))


def test_a_refused_key_is_not_shown(monkeypatch: pytest.MonkeyPatch) -> None:
    assert KEY not in str(injected_key(monkeypatch))


def test_an_endpoint_of_another_scheme_fails_at_construction(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("OPENAI_BASE_URL", "ftp://127.0.0.1/v1")
    with pytest.raises(BadEndpoint, match="OPENAI_BASE_URL"):
        OpenAIClient(FAST)


def given_transport(env: FakeProvider) -> tuple[OpenAIClient, Sleeps]:
    sleeps = Sleeps()
    client = OpenAIClient(FAST, sleep=sleeps, transport=httpx.HTTPTransport(retries=0))
    env.push(
        Reply(429, {}, headers={"Retry-After": "0.3"}),
        Reply(body=completion_body(prompt=4)),
        Reply(404, {"error": "x"}),
    )
    return client, sleeps


def test_a_given_transport_is_retried_as_the_default_is(env: FakeProvider) -> None:
    client, sleeps = given_transport(env)
    result = client.chat("m", chat())
    assert (result.call.usage and result.call.usage.input_tokens, result.call.attempts, sleeps) == (4, 2, [0.3])


def test_a_given_transport_does_not_retry_a_404(env: FakeProvider) -> None:
    client, _ = given_transport(env)
    client.chat("m", chat())
    err = failure(lambda: client.chat("m", chat()))
    assert (err.status, err.retryable, err.attempts) == (404, False, 1)


def test_a_proxy_in_the_environment_is_used(env: FakeProvider, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")  # nothing listens there
    monkeypatch.setenv("NO_PROXY", "")
    err = failure(lambda: OpenAIClient(ClientSettings(max_attempts=1)).chat("m", chat()))
    assert (err.kind, env.seen) == ("connection", [])


def test_no_proxy_in_the_environment_is_honoured(env: FakeProvider, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")  # nothing listens there
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    assert OpenAIClient(FAST).chat("m", chat()).call.attempts == 1


@dataclass(frozen=True)
class Tls:
    """Calls to a TLS provider with a self-signed certificate for ``localhost``: untrusted, trusted, and trusted
    but reached by another name."""

    untrusted: ProviderError
    """The call before the certificate is trusted."""
    trusted: ProviderResult
    """The call once ``SSL_CERT_FILE`` names it."""
    wrong_name: ProviderError
    """The call to ``127.0.0.1``, not a name the certificate holds."""
    seen: list[Seen]
    """The requests the provider received."""


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> Tls:
    if shutil.which("openssl") is None:
        pytest.skip("needs the openssl command to make a certificate")
    folder = tmp_path_factory.mktemp("tls")
    cert, key = folder / "cert.pem", folder / "key.pem"
    request = "req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=localhost -addext subjectAltName=DNS:localhost"
    subprocess.run(
        ["openssl", *request.split(), "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True
    )
    settings = ClientSettings(read_timeout=2.0, max_attempts=2)
    with pytest.MonkeyPatch.context() as patch, FakeProvider(tls=(str(cert), str(key))) as fake:
        patch.setenv("OPENAI_API_KEY", KEY)
        patch.delenv("SSL_CERT_DIR", raising=False)
        port = fake.url.rsplit(":", 1)[1]
        patch.setenv("OPENAI_BASE_URL", f"https://localhost:{port}/v1")
        patch.delenv("SSL_CERT_FILE", raising=False)
        untrusted = failure(lambda: OpenAIClient(settings, sleep=Sleeps()).chat("m", chat()))
        patch.setenv("SSL_CERT_FILE", str(cert))  # trusted, as httpx would take it
        trusted = OpenAIClient(settings, sleep=Sleeps()).chat("m", chat())
        patch.setenv("OPENAI_BASE_URL", f"https://127.0.0.1:{port}/v1")  # trusted, but not for this name
        wrong_name = failure(lambda: OpenAIClient(settings, sleep=Sleeps()).chat("m", chat()))
        return Tls(untrusted, trusted, wrong_name, fake.seen)


def test_a_self_signed_certificate_is_a_connection_error_retried(tls: Tls) -> None:
    assert (tls.untrusted.kind, tls.untrusted.attempts) == ("connection", 2)


def test_an_untrusted_certificate_is_named_as_the_cause(tls: Tls) -> None:
    assert "CERTIFICATE_VERIFY_FAILED" in tls.untrusted.message


def test_a_tls_failure_hides_the_key(tls: Tls) -> None:
    assert KEY not in str(tls.untrusted)


def test_a_certificate_named_by_ssl_cert_file_is_trusted(tls: Tls) -> None:
    assert tls.trusted.call.usage is not None and tls.trusted.call.usage.input_tokens == 11


def test_a_trusted_certificate_for_another_host_name_is_refused(tls: Tls) -> None:
    assert (tls.wrong_name.kind, "CERTIFICATE_VERIFY_FAILED" in tls.wrong_name.message) == ("connection", True)


def test_only_the_trusted_call_reaches_the_provider_with_its_key(tls: Tls) -> None:
    assert [seen.headers["authorization"] for seen in tls.seen] == [f"Bearer {KEY}"]
