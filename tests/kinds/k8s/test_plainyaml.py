"""The first attempt's kubeconfig reader (waitfor/net/k8s/plainyaml.py) against PyYAML itself:
what it accepts it reads exactly as ``yaml.safe_load`` does; everything else it refuses (None)."""

from __future__ import annotations

import itertools
import json
import random

import pytest
import yaml

from waitfor.net.k8s import plainyaml

KUBECTL_STYLE = """\
apiVersion: v1
clusters:
- cluster:
    certificate-authority-data: LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSUM+/=
    server: https://127.0.0.1:6443
    tls-server-name: kubernetes.default.svc
  name: kind-kind
- cluster:
    insecure-skip-tls-verify: true
    server: https://[::1]:6443/prefix
  name: other
contexts:
- context:
    cluster: kind-kind
    namespace: app
    user: kind-kind
  name: kind-kind
current-context: kind-kind
kind: Config
preferences: {}
users:
- name: kind-kind
  user:
    token: eyJhbGciOiJSUzI1NiIsImtpZCI6IjEifQ.eyJzdWIiOiJ4In0.c2ln-_x
- name: "quoted"
  user:
    tokenFile: '/var/run/token file'
"""

INDENTED = """\
# written by hand
apiVersion: v1
clusters:
  - name: lab
    cluster:
      server: https://lab:6443

      certificate-authority: /etc/lab/ca.crt
contexts:
  -   name: lab
      context: {cluster: lab}
current-context: lab
"""

ACCEPTED = [
    KUBECTL_STYLE,
    INDENTED.replace("context: {cluster: lab}", "context:\n        cluster: lab"),
    json.dumps(yaml.safe_load(KUBECTL_STYLE)),
    json.dumps(yaml.safe_load(KUBECTL_STYLE), indent=2),
    "current-context: a\nusers: []\n",
    "token: 09fe9b4877638d417640efd0cd3438fb\nname: 2c99\nother: 1e5\n",  # digit first
]

REFUSED = [
    INDENTED,  # a flow mapping
    "a: 1\n",  # a number
    "a: 0x1f\n",
    "a: 0b101\n",
    "a: 0o17\n",
    "a: 017\n",
    "a: 1_000\n",
    "a: 1.5e3\n",
    "a: 190:20:30\n",
    "a: 2001-12-14\n",
    "a: yes\n",  # YAML 1.1's bool
    "a: No\n",
    "a: null\n",
    "a: ~\n",
    "a:\n",
    "a: b # comment\n",
    "a: &x b\nc: *x\n",
    "a: !!str b\n",
    "a: |\n  b\n",
    "a: >\n  b\n",
    '"a": "b\\n"\n',
    "a: 'it''s'\n",
    "a: b\na: c\n",  # a duplicate key
    "---\na: b\n",
    "a: b\n---\nc: d\n",
    "a: b\n  c\n",  # a continued scalar
    "a:\tb\n",
    "a: b\r\n",
    "a: é\n",
    "- a\n",
    "a: .inf\n",
    "a: =\n",
    "a: -b\n",
    "a: b:\n",
    "<<: b\n",
    '{"a": 1}',
    '{"a": "b", "a": "c"}',
    '{"a": "\\u00e9"}',
    '{"a": NaN}',
    "",
]


@pytest.mark.parametrize("text", ACCEPTED)
def test_accepted_reads_as_pyyaml_does(text: str) -> None:
    read = plainyaml.load(text)
    assert read is not None
    assert read == yaml.safe_load(text)


@pytest.mark.parametrize("text", REFUSED)
def test_refused_steps_aside(text: str) -> None:
    assert plainyaml.load(text) is None


def mutations(text: str, rng: random.Random) -> list[str]:
    """The accepted documents with a character changed, inserted or removed, anywhere."""
    alphabet = " :-#'\"{}[]&*!|>\n\tab01.~=,%@xXeE_+"
    found = []
    for _ in range(400):
        at = rng.randrange(len(text) + 1)
        choice = rng.choice(alphabet)
        found.append(text[:at] + choice + text[at:])
        found.append(text[:at] + choice + text[at + 1 :])
        found.append(text[:at] + text[at + 1 :])
    return found


def test_never_reads_otherwise_than_pyyaml() -> None:
    rng = random.Random(35)
    checked = accepted = 0
    for text in itertools.chain(ACCEPTED, REFUSED, *(mutations(t, rng) for t in ACCEPTED)):
        read = plainyaml.load(text)
        checked += 1
        if read is None:
            continue
        accepted += 1
        try:
            expected = yaml.safe_load(text)
        except yaml.YAMLError:
            pytest.fail(f"read a document PyYAML refuses: {text!r}")
        assert read == expected, text
    assert accepted > checked // 10  # the mutations are not all refused: the check means something
