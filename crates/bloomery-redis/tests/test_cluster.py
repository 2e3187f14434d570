"""A 3-primary Redis Cluster on loopback with the module on every node: redis-py's
RedisCluster client adds 100,000 items over 1,000 keys and finds every one."""
import subprocess
import time

from redis.cluster import RedisCluster

from conftest import Server


def test_a_three_primary_cluster_serves_filters_across_slots(tmp_path):
    nodes = []
    try:
        for index in range(3):
            directory = tmp_path / f"node{index}"
            directory.mkdir()
            nodes.append(Server(directory, "--cluster-enabled", "yes",
                                "--cluster-config-file", str(directory / "nodes.conf")).start())
        addresses = [f"127.0.0.1:{node.port}" for node in nodes]
        subprocess.run(["redis-cli", "--cluster", "create", *addresses, "--cluster-replicas", "0", "--cluster-yes"],
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=60)
        deadline = time.monotonic() + 30
        while any(node.client().cluster("info")["cluster_state"] != "ok" for node in nodes):
            assert time.monotonic() < deadline, "the cluster did not come up"
            time.sleep(0.1)

        cluster = RedisCluster(host="127.0.0.1", port=nodes[0].port)
        keys = [f"filter:{k}" for k in range(1000)]
        for key in keys:
            items = [f"{key}:item:{i}" for i in range(100)]
            replies = cluster.execute_command("BF.MADD", key, *items)
            # 1 for each new item; a rare 0 is an item the filter already took as present.
            assert len(replies) == 100 and sum(replies) >= 95, (key, replies)
        for key in keys:
            items = [f"{key}:item:{i}" for i in range(100)]
            assert all(cluster.execute_command("BF.MEXISTS", key, *items)), key
        # The keys really are spread over the three nodes.
        counts = [node.client().dbsize() for node in nodes]
        assert sum(counts) == 1000 and min(counts) > 200, counts
        cluster.close()
    finally:
        for node in nodes:
            node.stop()
