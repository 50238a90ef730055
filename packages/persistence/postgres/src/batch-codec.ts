import { crc32 } from 'node:zlib'
import { SessionSeq, type StoredSessionEvent } from '@dsh/session'
import { checkEventBytes, EVENT_MAX_BYTES, persistenceError } from '@dsh/session-persistence/backend'
import { compress, decompress } from 'zstd-napi'

/** One batch as its row stores it. */
export interface EncodedBatch {
  readonly firstSeq: number
  readonly count: number
  readonly plainLength: number
  /** CRC32 of the plaintext, as a signed 32-bit integer (the column is `integer`). */
  readonly checksum: number
  /** One zstd frame of the batch's JSONL (one event per line). */
  readonly body: Buffer
}

/** What a batch row holds, as read back. */
export interface BatchRow {
  readonly first_seq: number
  readonly count: number
  readonly plain_length: number
  readonly checksum: number
  readonly body: Buffer
}

const LEVEL = 3

/** Encodes a batch: JSONL lines, CRC32 of the plaintext, one zstd frame. */
export function encodeBatch(events: readonly StoredSessionEvent[]): EncodedBatch {
  let text = ''
  for (const e of events) {
    const line = JSON.stringify({ type: e.type, seq: e.seq, time: e.time, data: e.data })
    // A UTF-16 code unit is at most 3 UTF-8 bytes: only a line that could be over the cap is measured.
    if (line.length * 3 > EVENT_MAX_BYTES) checkEventBytes(e.seq, Buffer.byteLength(line))
    text += `${line}\n`
  }
  const plain = Buffer.from(text, 'utf8')
  return {
    firstSeq: events[0]!.seq,
    count: events.length,
    plainLength: plain.length,
    checksum: crc32(plain) | 0,
    body: compress(plain, { compressionLevel: LEVEL }),
  }
}

/**
 * Decodes a committed batch row. Anything that does not read back as written
 * (decompression, length, checksum, JSON, seq contiguity) is
 * `SESSION_PERSISTENCE_CORRUPT`: a committed batch is never dropped silently.
 */
export function decodeBatch(id: string, row: BatchRow): StoredSessionEvent[] {
  const corrupt = (why: string, cause?: unknown) =>
    persistenceError(
      'SESSION_PERSISTENCE_CORRUPT',
      `The batch of session '${id}' starting at seq ${row.first_seq} ${why}; the stored log is damaged.`,
      {
        details: { id, firstSeq: row.first_seq },
        ...(cause === undefined ? {} : { cause }),
      },
    )
  let plain: Buffer
  try {
    plain = decompress(row.body)
  } catch (error) {
    throw corrupt('does not decompress', error)
  }
  if (plain.length !== row.plain_length) throw corrupt(`decompresses to ${plain.length} bytes, ${row.plain_length} were written`)
  if ((crc32(plain) | 0) !== row.checksum) throw corrupt('fails its CRC32 checksum')
  const lines = plain.toString('utf8').split('\n')
  lines.pop()
  if (lines.length !== row.count) throw corrupt(`holds ${lines.length} events, ${row.count} were written`)
  return lines.map((line, i) => {
    let event: StoredSessionEvent
    try {
      event = JSON.parse(line) as StoredSessionEvent
    } catch (error) {
      throw corrupt(`has an event that is not JSON (line ${i + 1})`, error)
    }
    if (event.seq !== row.first_seq + i) throw corrupt(`has seq ${String(event.seq)} where ${row.first_seq + i} belongs`)
    return deepFreeze({ type: event.type, seq: SessionSeq(event.seq), time: event.time, data: event.data })
  })
}

function deepFreeze<T>(value: T): T {
  if (typeof value === 'object' && value !== null) {
    for (const child of Object.values(value)) deepFreeze(child)
    Object.freeze(value)
  }
  return value
}
