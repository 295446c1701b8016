"""Secret masking (hangdesk/masking): by name, by shape, keyed fingerprints that keep
differences visible."""

import pytest

from hangdesk import masking as secrets
from hangdesk.masking import (
    is_secret_name,
    mask_environment,
    mask_json,
    mask_text,
    mask_value,
    masked,
)

KEY = b"test-key"
HF = "hf_" + "AbCdEfGhIjKlMnOpQrStUvWxYz0123456789"
GHP = "ghp_" + "aB3dE6gH9jK2mN5pQ8sT1vW4yZ7bC0eF3hJ6"
AWS_ID = "AKIAIOSFODNN7EXAMPLE"
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
JWT = (
    "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9."
    "eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4gRG9lIn0."
    "SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"
)


@pytest.mark.parametrize(
    "name",
    [
        "HF_TOKEN",
        "HANGDESK_TOKEN",
        "WANDB_API_KEY",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_ACCESS_KEY_ID",
        "AWS_SESSION_TOKEN",
        "OPENAI_API_KEY",
        "DB_PASSWORD",
        "PGPASSWORD",
        "MY_SECRET",
        "hf-token",
        "--password",
        "MLFLOW_TRACKING_PASSWORD",
        "SENTRY_DSN",
    ],
)
def test_it_knows_secret_names(name):
    assert is_secret_name(name)


@pytest.mark.parametrize(
    "name",
    [
        "NCCL_SOCKET_IFNAME",
        "NCCL_IB_HCA",
        "TORCH_NCCL_ASYNC_ERROR_HANDLING",
        "TORCHELASTIC_RUN_ID",
        "CUDA_VISIBLE_DEVICES",
        "TOKENIZERS_PARALLELISM",
        "SSH_AUTH_SOCK",
        "PWD",
        "PATH",
        "MASTER_ADDR",
        "AWS_REGION",
        "LOCAL_RANK",
    ],
)
def test_it_leaves_configuration_names_alone(name):
    assert not is_secret_name(name)


def test_equal_values_share_a_token_and_different_values_do_not():
    a = mask_value("HF_TOKEN", "one", key=KEY)
    assert a == mask_value("HF_TOKEN", "one", key=KEY)
    assert a != mask_value("HF_TOKEN", "two", key=KEY)
    assert "one" not in a and a.startswith("[REDACTED:")


def test_the_fingerprint_depends_on_the_key():
    assert masked("one", key=b"a") != masked("one", key=b"b")


def test_the_default_key_is_the_one_set_by_the_caller():
    secrets.set_default_key(b"first")
    first = masked("value")
    secrets.set_default_key(b"second")
    assert masked("value") != first
    secrets.set_default_key(b"first")
    assert masked("value") == first
    from django.conf import settings

    secrets.set_default_key(secrets.console_key(settings.SECRET_KEY))  # as the console set it


def test_the_console_key_is_the_one_its_stored_masks_were_made_with():
    from django.conf import settings
    from django.utils.crypto import salted_hmac

    for secret in ("test-only-not-secret", "k" * 50, "é✓"):
        made = salted_hmac("hangdesk.masking", "fingerprint", secret=secret).digest()
        assert secrets.console_key(secret) == made
    # The console's processes fingerprint with it (core's start-up sets it).
    key = secrets.console_key(settings.SECRET_KEY)
    assert masked("value") == masked("value", key=key)
    secrets.set_default_key(b"other")
    assert masked("value") != masked("value", key=key)
    secrets.set_default_key(key)


def test_it_masks_an_environment_by_name_and_keeps_configuration():
    env = {
        "HANGDESK_TOKEN": "hd_abc",
        "NCCL_SOCKET_IFNAME": "eth0",
        "MASTER_PORT": "29500",
        "WANDB_API_KEY": "0123456789abcdef",
    }
    shown = mask_environment(env, key=KEY)
    assert shown["NCCL_SOCKET_IFNAME"] == "eth0"
    assert shown["MASTER_PORT"] == "29500"
    assert "hd_abc" not in str(shown) and "0123456789abcdef" not in str(shown)


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        (f"python train.py --hf_token {HF} --lr 0.1", HF),
        ("torchrun train.py --password=hunter2 --epochs 3", "hunter2"),
        ("torchrun train.py --api-key sesame --epochs 3", "sesame"),
        (f"git clone https://{GHP}@github.com/o/r", GHP),
        ("postgres://bob:s3cr3t@db.internal:5432/runs", "s3cr3t"),
        (f"export AWS_ACCESS_KEY_ID={AWS_ID}", AWS_ID),
        (f"aws configure set key {AWS_ID} and {AWS_SECRET}", AWS_SECRET),
        (f"Authorization: Bearer {JWT}", JWT),
        ("Authorization: Bearer hd_shortbutsecret", "hd_shortbutsecret"),
        ("Authorization: Basic dXNlcjpwYXNz", "dXNlcjpwYXNz"),
        ('{"password": "pa55", "user": "bob"}', "pa55"),
        ("login with password = opensesame now", "opensesame"),
        ("HF_TOKEN=abc python train.py", "abc"),
    ],
)
def test_it_masks_secrets_by_shape_in_text(text, secret):
    shown = mask_text(text, key=KEY)
    assert secret not in shown
    assert "[REDACTED:" in shown


def test_it_keeps_the_rest_of_a_command_line():
    shown = mask_text("torchrun --nproc_per_node 8 train.py --password=x --lr 0.1", key=KEY)
    assert shown.startswith("torchrun --nproc_per_node 8 train.py --password=[REDACTED:")
    assert shown.endswith("--lr 0.1")


def test_it_masks_a_private_key_block_whole():
    text = (
        "before\n-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmU\n"
        "AAAAAAAAAAAAAA\n-----END OPENSSH PRIVATE KEY-----\nafter"
    )
    shown = mask_text(text, key=KEY)
    assert "b3BlbnNzaC1rZXktdjEAAAAABG5vbmU" not in shown
    assert shown.startswith("before\n-----BEGIN OPENSSH PRIVATE KEY-----")
    assert shown.endswith("after")


def test_it_masks_an_environ_blob_by_name():
    blob = "PATH=/usr/bin\0HANGDESK_TOKEN=hd_one two\0NCCL_DEBUG=INFO\0"
    shown = mask_text(blob, key=KEY)
    assert "hd_one" not in shown and "two" not in shown
    assert "PATH=/usr/bin\0" in shown and "NCCL_DEBUG=INFO" in shown


@pytest.mark.parametrize(
    "line",
    [
        "[rank3]:[E ProcessGroupNCCL.cpp:616] [Rank 3] Watchdog caught collective operation "
        "timeout: WorkNCCL(SeqNum=5, OpType=ALLREDUCE, NumelIn=1048576, NumelOut=1048576, "
        "Timeout(ms)=600000) ran for 600032 milliseconds before timing out.",
        "CollectiveFingerPrint(SequenceNumber=513876813OpType=BROADCAST).",
        'File "/opt/conda/lib/python3.10/site-packages/torch/distributed/distributed_c10d.py"',
        "_ZN4c10d16ProcessGroupNCCL8WorkNCCL15isCompletedEv (libtorch_cuda.so)",
        "commit 3a215a7f0e1d2c3b4a5968778695a4b3c2d1e0f9",
        "GPU-5d4c3b2a-1f0e-4d9c-8b7a-695847362514",
        "NCCL INFO NET/IB : Using [0]mlx5_0:1/IB ; OOB ib0:10.0.0.1<0>",
        "a token of appreciation",
    ],
)
def test_it_leaves_diagnostic_lines_alone(line):
    assert mask_text(line, key=KEY) == line


def test_masking_twice_changes_nothing():
    once = mask_text(f"--token {HF} --password=x https://u:p@h/", key=KEY)
    assert mask_text(once, key=KEY) == once


def test_it_masks_a_diagnosis_and_keeps_env_diffs_distinct():
    diagnosis = {
        "env_diffs": [
            {
                "name": "HF_TOKEN",
                "values": [{"value": "aaa", "ranks": "0-2"}, {"value": "bbb", "ranks": "3"}],
            },
            {"name": "NCCL_IB_HCA", "values": [{"value": "mlx5_0"}, {"value": "mlx5_1"}]},
        ],
        "evidence": [{"text": "python train.py --password=hunter2"}],
        "shell_init": [{"name": "WANDB_API_KEY", "value": "k", "line": "export WANDB_API_KEY=k"}],
    }
    shown = mask_json(diagnosis, key=KEY)
    token_values = [v["value"] for v in shown["env_diffs"][0]["values"]]
    assert "aaa" not in token_values and "bbb" not in token_values
    assert token_values[0] != token_values[1]
    assert [v["value"] for v in shown["env_diffs"][1]["values"]] == ["mlx5_0", "mlx5_1"]
    assert "hunter2" not in str(shown)
    assert shown["shell_init"][0]["value"] != "k"
    assert "=k" not in shown["shell_init"][0]["line"]


def test_a_megabyte_of_adversarial_text_is_masked_in_one_pass():
    # Shapes that make a backtracking matcher quadratic: long runs of near-tokens.
    for text in ("eyJ" * 350_000, "a=" * 500_000, "-" * 1_000_000, "hf_" + "A" * 1_000_000):
        assert len(mask_text(text, key=KEY)) > 0


def test_a_long_log_is_masked_line_by_line_with_nothing_missed():
    filler = "[rank0]:[I ProcessGroupNCCL.cpp:852] step 12 all_reduce done\n" * 200
    secret_lines = (
        f"login with {HF}\n",
        f"{AWS_SECRET}\n",
        "connect postgres://u:pw1234@db/x\n",
        "python train.py --password hunter2\n",
    )
    text = filler + "".join(secret_lines) + filler
    shown = mask_text(text, key=KEY)
    for secret in (HF, AWS_SECRET, "pw1234", "hunter2"):
        assert secret not in shown
    assert shown.count("step 12 all_reduce done") == 400


@pytest.mark.parametrize(
    "secret",
    [HF, AWS_SECRET, "--password hunter2", "postgres://u:pw1234@db/x", "Bearer abc.def"],
)
def test_one_long_line_is_masked_as_the_word_masking_masks_it(secret):
    # A rank list at fleet scale is one line of 26,000 characters: read whole, not by word.
    ranks = ", ".join(str(r) for r in range(0, 32_000, 8))
    for text in (f"{ranks}, {secret}", f"{secret} {ranks}", ranks):
        assert len(text) > 4096 and "\n" not in text
        shown = mask_text(text, key=KEY)
        assert shown == secrets.text._mask_words(text, KEY)
    assert mask_text(ranks, key=KEY) == ranks
    assert secret.split()[-1].split(":")[-1] not in mask_text(f"{ranks}, {secret}", key=KEY)


def test_a_list_of_numbers_is_kept_as_a_new_list():
    data = {"ranks": list(range(32_000)), "mixed": [1, 2.5, None, True, HF]}
    shown = mask_json(data, key=KEY)
    assert shown["ranks"] == data["ranks"] and shown["ranks"] is not data["ranks"]
    assert shown["mixed"][:4] == [1, 2.5, None, True] and HF not in str(shown)
