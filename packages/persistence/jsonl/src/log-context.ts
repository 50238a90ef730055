import type { LogCodec } from './codec.js'
import type { ChangeFeed } from './feed.js'
import type { LogReader } from './log-reader.js'
import type { JsonlPersistenceMetrics } from './types.js'

/** What every room of the log side shares: the root, its encoding, the metrics, the reads and the change feed. */
export interface LogContext {
  readonly root: string
  readonly codec: LogCodec
  readonly metrics: JsonlPersistenceMetrics
  readonly reader: LogReader
  readonly feed: ChangeFeed
}
