// The local-stack building blocks behind `reach up`, for tests and tools that embed them.
export { Supervisor, type ProcessSpec } from './local/supervisor.js';
export { ensurePostgres, ensureRedis } from './local/deps.js';
export { portOpen, waitFor, httpOk } from './local/net.js';
export { crashLoop, restartDelayMs, STABLE_RUN_MS } from './local/supervisor.js';
export {
  applyProperties,
  brokerClassArchive,
  brokerConfig,
  internalReplication,
  kafkaClusterId,
  kafkaLayout,
  kafkaNodes,
  kafkaVersion,
  libsDir,
  MAX_LOCAL_BROKERS,
  type KafkaLayout,
  type KafkaNode,
} from './local/kafka.js';
export { classArchiveArgs, classArchivePath, ensureClassArchive, type TrainingRun } from './local/kafka-class-archive.js';
export { serviceInstances, SERVICES, INSTANCE_PORT_STEP, MAX_INSTANCES, QUIET_SERVICES, QUIET_SERVICE_NODE_FLAGS, type UpOptions } from './local/stack.js';
export { parseUpArgs } from './commands/up.js';
export { defaultHome, paths } from './paths.js';
export { dirBytes, kafkaStorage, type KafkaStorage } from './local/kafka-storage.js';
export { bytes } from './commands/storage.js';
