import { resolve } from 'node:path'
import { SessionId } from '@dsh/session'
import type { SessionPersistence } from '@dsh/session-persistence'
import { toV0Event, toV0Header } from './convert.js'
import { ImportV0Error, throwIfAborted } from './errors.js'
import type { V0Compression } from './layout.js'
import type { V0Event } from './v0-types.js'
import { writeV0Log } from './writer.js'

/**
 * `exportV0`: dsh sessions back into a v0 root, so that an import can be
 * checked by a round trip (and so the harness can read what dsh wrote).
 *
 * Invariants: imported events come back as the exact lines they were read
 * from (see `convert.ts`); a seeded session is written whole (v0 logs copy
 * their inherited prefix), with `seedLength` = its exact cut; one frame per
 * turn (a batch ends after each `turn/end`); an existing log in the target is
 * never overwritten.
 */

export interface ExportV0Options {
  readonly ids: readonly string[]
  readonly persistence: SessionPersistence
  /** The v0 root to write into (created if missing). */
  readonly to: string
  /** `zstd` (default) or `none`. */
  readonly compression?: V0Compression
  /**
   * Pack runs of text/reasoning/tool-call deltas into `*-chunks` rows as the
   * harness does (default false: one line per event, so that a log imported
   * without rows comes back byte for byte).
   */
  readonly packChunks?: boolean
  readonly signal?: AbortSignal
}

export interface ExportV0Result {
  readonly to: string
  readonly sessions: readonly { readonly id: string; readonly path: string; readonly events: number }[]
}

export async function exportV0(options: ExportV0Options): Promise<ExportV0Result> {
  const to = resolve(options.to)
  const sessions: { id: string; path: string; events: number }[] = []
  for (const id of options.ids) {
    throwIfAborted(options.signal)
    if ((await options.persistence.stat(SessionId(id), options.signal)) === undefined) {
      throw new ImportV0Error('IMPORT_V0_NOT_FOUND', `Session ${JSON.stringify(id)} is not persisted here; 'dsh sessions' lists the ids.`, {
        details: { id },
      })
    }
    const observation = await options.persistence.inspect(SessionId(id), options.signal)
    const events = observation.events.map(toV0Event)
    const path = await writeV0Log(to, toV0Header(observation.header, observation.inheritedEventCount), turnBatches(events), {
      compression: options.compression ?? 'zstd',
      packChunks: options.packChunks === true,
    })
    sessions.push({ id, path, events: events.length })
  }
  return { to, sessions }
}

/** Splits events into batches that end after each `turn/end`. */
function turnBatches(events: readonly V0Event[]): V0Event[][] {
  const batches: V0Event[][] = []
  let batch: V0Event[] = []
  for (const event of events) {
    batch.push(event)
    if (event.type === 'turn/end') {
      batches.push(batch)
      batch = []
    }
  }
  if (batch.length > 0) batches.push(batch)
  return batches
}
