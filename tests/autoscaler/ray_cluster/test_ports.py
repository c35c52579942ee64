"""Every Ray node started on this machine gets ports of its own: Ray refuses a node whose
components share a port, and two nodes on one port collide."""

from __future__ import annotations

import socket

from autoscaler.ray_cluster.processes import PORT_FLAGS, free_ports, port_flags


def test_ports_handed_out_are_distinct_within_and_across_calls():
    first = free_ports(40)
    second = free_ports(40)
    assert len(set(first)) == 40
    assert not set(first) & set(second)  # a head's ports never meet its workers'


def test_ports_handed_out_are_free():
    for port in free_ports(5):
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", port))


def test_a_node_gets_one_port_per_component():
    flags = port_flags()
    assert [flag.split("=")[0] for flag in flags] == list(PORT_FLAGS)
    assert len({flag.split("=")[1] for flag in flags}) == len(PORT_FLAGS)
