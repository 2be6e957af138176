"""redact(): every occurrence of every registered secret is masked, the PVE token's uuid tail too.

Scenarios written by hand: the token below has the shape PVE prints for ``pveum user token add``
(``user@realm!name=uuid``; pve-access-control PVE/API2/User.pm ``full-tokenid`` and ``value``).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from gpuhost.redact import MASK, forget_all, redact, register_secret

UUID = "3d4f3bd2-8e0b-4b1c-9f55-2b1f6a1f0c7e"
TOKEN = f"root@pam!gpuhost={UUID}"


@pytest.fixture(autouse=True)
def clean() -> Iterator[None]:
    forget_all()
    yield
    forget_all()


def test_one_secret_twice_in_a_line_is_masked_both_times() -> None:
    register_secret("hunter2-password")
    line = "login hunter2-password failed; retrying with hunter2-password"
    assert redact(line) == "login ******** failed; retrying with ********"


def test_the_uuid_tail_of_a_pve_token_alone_is_masked() -> None:
    register_secret(TOKEN)
    # an API error echoes only the secret part, as the Authorization header's value after '='
    assert redact(f"401 for PVEAPIToken=root@pam!gpuhost={UUID}") == "401 for PVEAPIToken=********"
    assert redact(f"secret {UUID} rejected") == "secret ******** rejected"


def test_the_whole_token_is_one_mask_not_a_visible_prefix() -> None:
    register_secret(TOKEN)
    assert redact(f"token {TOKEN}.") == "token ********."


def test_two_secrets_and_plain_text_around_them() -> None:
    register_secret("alpha-secret")
    register_secret("beta-secret")
    assert redact("a=alpha-secret b=beta-secret c=gamma") == "a=******** b=******** c=gamma"


def test_short_values_and_empty_text_are_left_alone() -> None:
    register_secret("abc")  # under 4 characters: masking it would mask ordinary words
    register_secret(None)
    register_secret("")
    assert redact("abc abcd") == "abc abcd"
    assert redact("") == ""


def test_a_short_tail_after_equals_is_not_registered_alone() -> None:
    register_secret("name=ab")
    assert redact("name=ab and ab") == f"{MASK} and ab"


def test_the_mask_itself_has_nothing_of_the_secret() -> None:
    register_secret("s3cr3t-value")
    out = redact("s3cr3t-value")
    assert out == MASK and "s3cr3t" not in out


def test_forget_all_drops_every_secret() -> None:
    register_secret("s3cr3t-value")
    forget_all()
    assert redact("s3cr3t-value") == "s3cr3t-value"


def test_a_secret_inside_a_longer_one_is_masked_in_both() -> None:
    # the longer secret is replaced whole first; the shorter one elsewhere in the text too
    register_secret("pass")
    register_secret("password-long")
    assert redact("password-long then pass") == "******** then ********"


def test_the_tail_is_what_follows_the_last_equals() -> None:
    register_secret("legacy=key=4f1c9a7e")  # a secret that itself holds '=': its tail is after the last one
    assert redact("tail 4f1c9a7e alone") == "tail ******** alone"
    assert redact("middle key=x") == "middle key=x"


def test_a_four_character_tail_is_registered() -> None:
    register_secret("root@pam!ci=a1b2")
    assert redact("a1b2 leaked") == "******** leaked"


def test_the_longest_secret_is_masked_first_whatever_their_order() -> None:
    # 'zzzz-inner' sorts after the longer secret that contains it: masking it first would leave 'aaaa-' and
    # '-bbbb' of the longer one in the text
    register_secret("zzzz-inner")
    register_secret("aaaa-zzzz-inner-bbbb")
    assert redact("key aaaa-zzzz-inner-bbbb") == "key ********"
