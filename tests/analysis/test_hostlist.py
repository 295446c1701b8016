"""Slurm's compressed host lists, on every form its documentation shows (hostlist(3), the
Slurm::Hostlist man page, slurm.conf's NodeName, `scontrol show hostnames`)."""

import pytest

from analysis.schedulers.hostlist import HostListError, compress, expand


@pytest.mark.parametrize(
    ("text", "names"),
    [
        # hostlist(3): "linux[1-3,6]" represents linux1, linux2, linux3 and linux6
        ("linux[1-3,6]", ["linux1", "linux2", "linux3", "linux6"]),
        # Slurm::Hostlist: names or bracketed lists separated by ',' or white space
        ("node1,node[2-5,12]", ["node1", "node2", "node3", "node4", "node5", "node12"]),
        ("node21 node[27-29]", ["node21", "node27", "node28", "node29"]),
        ("tux[0-2,12,20-21]", ["tux0", "tux1", "tux2", "tux12", "tux20", "tux21"]),
        # zero padding kept from the range's bound
        ("gpu[001-004,010]", ["gpu001", "gpu002", "gpu003", "gpu004", "gpu010"]),
        ("tux[08-10]", ["tux08", "tux09", "tux10"]),
        ("tux[8-10]", ["tux8", "tux9", "tux10"]),
        # slurm.conf: several numeric ranges in one name ("rack[0-63]_blade[0-41]")
        ("rack[0-1]_blade[0-1]", ["rack0_blade0", "rack0_blade1", "rack1_blade0", "rack1_blade1"]),
        # text after a bracket, and brackets nested in a list of lists
        ("a[1-2]b", ["a1b", "a2b"]),
        (
            "gpu[01-02]-ib[1-2],login[1,3]",
            ["gpu01-ib1", "gpu01-ib2", "gpu02-ib1", "gpu02-ib2", "login1", "login3"],
        ),
        # a plain name, a dotted one, a name with dashes and an empty list
        ("lab-node-0", ["lab-node-0"]),
        ("node1.cluster.example", ["node1.cluster.example"]),
        ("lab-node-[0-1]", ["lab-node-0", "lab-node-1"]),
        ("", []),
        # a single number in brackets, and a name given twice kept once
        ("n[7]", ["n7"]),
        ("n1,n[1-2]", ["n1", "n2"]),
    ],
)
def test_it_expands_every_documented_form(text, names):
    assert expand(text) == names


def test_it_expands_the_3d_box_of_the_bluegene_days():
    # Slurm::Hostlist: "bgl[123x456]" is 1..4 x 2..5 x 3..6, 64 nodes
    names = expand("bgl[123x456]")
    assert len(names) == 64
    assert names[:3] == ["bgl123", "bgl124", "bgl125"]
    assert names[-1] == "bgl456"
    assert expand("bg[00Ax00C]") == ["bg00A", "bg00B", "bg00C"]  # base-36 coordinates


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("gpu[1-", "not closed"),
        ("gpu1-2]", "with no"),
        ("gpu[[1-2]]", "inside a bracket"),
        ("gpu[5-1]", "backwards"),
        ("gpu[a-b]", "not a number"),
        ("gpu[1-2];rm", "not a host name"),
        ("gpu[1234567890]", "not a number"),
    ],
)
def test_it_refuses_what_slurm_would_not_write(text, why):
    with pytest.raises(HostListError, match=why):
        expand(text)


def test_a_list_past_the_cap_is_refused_before_anything_is_expanded():
    with pytest.raises(HostListError, match="more than 100,000"):
        expand("n[1-999999999]")
    with pytest.raises(HostListError, match="more than 10 hosts"):
        expand("a[1-4]b[1-3]", limit=10)


def test_compress_gives_the_names_back():
    names = ["gpu001", "gpu002", "gpu003", "gpu004", "gpu010", "lab-node-0", "lab-node-1", "x"]
    text = compress(names)
    assert text == "gpu[001-004,010],lab-node-[0-1],x"
    assert expand(text) == names
    assert expand(compress([f"n{i:05d}" for i in range(10_000)])) == [
        f"n{i:05d}" for i in range(10_000)
    ]
