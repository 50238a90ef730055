import { consoleLogger, type Logger } from '@dsh/context'
import type { SessionHeader } from '@dsh/session'
import { decodePayload } from './cache.js'
import { CheckpointDatabase } from './database.js'
import { checkpointIdentity, rowWitness } from './identity.js'

/** What a `CheckpointReader` did, for tests and benchmarks. */
export interface CheckpointReaderMetrics {
  /** Primary-key reads of the file (one per `state` call while it is open). */
  reads: number
  /** Lookups answered with a state (this lifecycle, cut and state version; not a failed unit). */
  hits: number
}

/**
 * Read-only lookups of single cached unit states, for a command that only
 * lists (`dsh sessions`): no projection registry, no writer, no scheduler.
 * The file is opened read-only if it exists and is never created, changed,
 * rebuilt or removed; without a usable file every lookup misses. Each lookup
 * is one primary-key read of one row. The caller names the unit's key and
 * state version and checks the state against the unit's schema itself.
 */
export class CheckpointReader {
  readonly #db: CheckpointDatabase
  readonly #logger: () => Logger
  readonly metrics: CheckpointReaderMetrics = { reads: 0, hits: 0 }

  /** `path`: the cache file, e.g. `projectionCachePath(root)`. Warnings (a damaged or unreadable file) go to `logger`. */
  constructor(path: string, logger: Logger | (() => Logger) = consoleLogger) {
    this.#logger = typeof logger === 'function' ? logger : () => logger
    this.#db = new CheckpointDatabase(path, this.#logger, { readOnly: true })
  }

  /**
   * The state of unit `key` cached for this exact lifecycle (header witness),
   * cut and `stateVersion`, or `undefined`: no row, a row of another
   * lifecycle, cut or version, a failed unit, a poisoned row or a read fault
   * (derived data: never an error).
   */
  state(header: SessionHeader, inheritedEventCount: number, key: string, stateVersion: number): unknown {
    if (!this.#db.available) return undefined
    let stored: string | undefined
    try {
      this.metrics.reads++
      stored = this.#db.read(header.id, key)
    } catch (error) {
      this.#logger().warn(`dsh: reading the projection cache at ${this.#db.path} failed; treating it as a miss.`, error)
      return undefined
    }
    const witness = rowWitness(checkpointIdentity(header), inheritedEventCount, stateVersion)
    if (stored === undefined || !stored.startsWith(witness)) return undefined
    try {
      const row = decodePayload(stored.slice(witness.length), stateVersion, key, header)
      if (row.failed === true) return undefined
      this.metrics.hits++
      return row.state
    } catch {
      return undefined
    }
  }

  close(): void {
    this.#db.close()
  }
}
