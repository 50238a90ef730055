import { createRequire } from 'node:module'
import { crc32 } from 'node:zlib'
import { SessionSeq, type StoredSessionEvent } from '@dsh/session'
import { CappedLines, elidedLineEvents, eventLine, LINE_MAX_BYTES, persistenceError } from '@dsh/session-persistence/backend'
import { Compressor, decompress } from 'zstd-napi'
import type * as Binding from 'zstd-napi/binding.js'

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

/**
 * The batches' compressor, its level set once: the shared `compress` of
 * zstd-napi resets its context's parameters and maps them from an options
 * object at every call, which cost about as much CPU as compressing a 1 KiB
 * batch. Each call still writes one whole frame.
 */
let compressor: Compressor | undefined

function compressed(plain: Buffer): Buffer {
  if (compressor === undefined) {
    compressor = new Compressor()
    compressor.setParameters({ compressionLevel: LEVEL })
  }
  return compressor.compress(plain)
}

/** Encodes a batch: JSONL lines, CRC32 of the plaintext, one zstd frame. */
export function encodeBatch(events: readonly StoredSessionEvent[]): EncodedBatch {
  let text = ''
  for (const e of events) {
    text += `${eventLine(e)}\n`
  }
  const plain = Buffer.from(text, 'utf8')
  return {
    firstSeq: events[0]!.seq,
    count: events.length,
    plainLength: plain.length,
    checksum: crc32(plain) | 0,
    body: compressed(plain),
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
  if (row.plain_length > LINE_MAX_BYTES) return decodeLongBatch(row, corrupt)
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

/** Plaintext bytes decoded at a time from a long batch. */
const CHUNK = 1024 * 1024
let binding: typeof Binding | undefined

/**
 * A batch of more than `LINE_MAX_BYTES` of plaintext, read without holding
 * its plaintext: streamed out of its zstd frame a chunk at a time and split
 * into lines there (`CappedLines`); a line over the cap comes back as an
 * elided event (`elidedLineEvents`), never materialized. The batch is checked
 * as any: length, CRC32, count, seqs.
 */
function decodeLongBatch(row: BatchRow, corrupt: (why: string, cause?: unknown) => Error): StoredSessionEvent[] {
  const events: StoredSessionEvent[] = []
  let fault: string | undefined
  const lines = new CappedLines(
    (line) => {
      if (fault === undefined) fault = parseLine(line.toString('utf8'), row.first_seq + events.length, events)
    },
    (head, bytes) => {
      if (fault !== undefined) return
      const elided = elidedLineEvents(head, bytes, row.first_seq + events.length)
      if (typeof elided === 'string') fault = elided
      else events.push(...elided)
    },
  )
  binding ??= createRequire(import.meta.url)('zstd-napi/binding.js') as typeof Binding
  const ctx = new binding.DCtx()
  const out = Buffer.allocUnsafe(CHUNK)
  let input = row.body
  try {
    for (;;) {
      const [remaining, produced, read] = ctx.decompressStream(out, input)
      input = input.subarray(read)
      if (produced > 0) lines.push(out.subarray(0, produced))
      if (remaining === 0 && input.length === 0) break
      if (remaining === 0 || (read === 0 && produced === 0)) throw new Error('the frame does not end where the body does')
    }
  } catch (error) {
    throw corrupt('does not decompress', error)
  }
  if (lines.length !== row.plain_length) throw corrupt(`decompresses to ${lines.length} bytes, ${row.plain_length} were written`)
  if ((lines.crc | 0) !== row.checksum) throw corrupt('fails its CRC32 checksum')
  if (fault !== undefined || lines.unterminated > 0) throw corrupt(fault ?? 'does not end with a newline')
  if (events.length !== row.count) throw corrupt(`holds ${events.length} events, ${row.count} were written`)
  return events
}

/** One event line of seq `seq` pushed onto `into`, or why it is not one. */
function parseLine(line: string, seq: number, into: StoredSessionEvent[]): string | undefined {
  let event: StoredSessionEvent
  try {
    event = JSON.parse(line) as StoredSessionEvent
  } catch {
    return `has an event that is not JSON (seq ${seq})`
  }
  if (event.seq !== seq) return `has seq ${String(event.seq)} where ${seq} belongs`
  into.push(deepFreeze({ type: event.type, seq: SessionSeq(event.seq), time: event.time, data: event.data }))
  return undefined
}

function deepFreeze<T>(value: T): T {
  if (typeof value === 'object' && value !== null) {
    for (const child of Object.values(value)) deepFreeze(child)
    Object.freeze(value)
  }
  return value
}
