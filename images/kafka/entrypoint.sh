#!/bin/bash
# Starts a single-node Kafka in KRaft mode (one process, broker and controller, node id 1, no
# ZooKeeper) on $KAFKA_DATA, formatting its storage first when it holds none: later starts reuse
# the cluster id and the log that the first one wrote. Extra arguments are broker settings as
# KEY=VALUE (each passed as `--override KEY=VALUE`).
#
#   KAFKA_DATA                  the data folder, a volume (default /var/lib/kafka/data); the log
#                               lives in its `logs` folder, beside a fresh volume's lost+found
#   KAFKA_ADVERTISED_LISTENERS  what clients are told to dial (default PLAINTEXT://$(hostname):9092;
#                               the chart names the Service: PLAINTEXT://NAME.NAMESPACE.svc:9092)
#   KAFKA_HEAP_OPTS             the JVM's heap (default -Xms256m -Xmx256m)
#
# The settings file is written to $TMPDIR (default /tmp), so the root filesystem can be
# read-only.
set -euo pipefail

data=${KAFKA_DATA:-/var/lib/kafka/data}
logs=$data/logs
advertised=${KAFKA_ADVERTISED_LISTENERS:-PLAINTEXT://$(hostname):9092}
tmp=${TMPDIR:-/tmp}
settings=$tmp/kafka-server.properties

cat >"$settings" <<PROPERTIES
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@localhost:9093
controller.listener.names=CONTROLLER
listeners=PLAINTEXT://:9092,CONTROLLER://localhost:9093
advertised.listeners=$advertised
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
log.dirs=$logs
num.partitions=1
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
PROPERTIES

if [[ ! -s $logs/meta.properties ]]; then
  mkdir -p "$logs"
  # A cluster id is 16 random bytes in unpadded URL-safe base64 (what `kafka-storage
  # random-uuid` prints).
  cluster=${KAFKA_CLUSTER_ID:-$(head -c 16 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=')}
  kafka-run kafka.tools.StorageTool format --cluster-id "$cluster" --config "$settings" >&2
  echo "kafka-entrypoint: formatted $logs (cluster $cluster)" >&2
fi

overrides=()
for setting in "$@"; do overrides+=(--override "$setting"); done
KAFKA_LOG4J=${KAFKA_HOME:-/opt/kafka}/config/log4j2-broker.properties \
  KAFKA_HEAP_OPTS=${KAFKA_HEAP_OPTS:--Xms256m -Xmx256m} \
  exec kafka-run kafka.Kafka "$settings" "${overrides[@]}"
