import { createRequire } from 'node:module'
import { crc32 } from 'node:zlib'
import type { StoredSessionEvent } from '@dsh/session'
import { CappedLines, elidedLineEvents } from '@dsh/session-persistence/backend'
import type * as Binding from 'zstd-napi/binding.js'
import type { LogCodec } from './codec.js'
import { parseEventLines } from './log-format.js'
import type { TrailerFields } from './trailer.js'

/*
 * Batches whose plaintext is over `LINE_MAX_BYTES` are read without holding
 * their plaintext: decoded a chunk at a time (`forEachPlainChunk`) and split
 * into lines there (`CappedLines`), each line kept only up to the cap. A line
 * over the cap (a log written before the event cap, or by another writer) is
 * never materialized: its first bytes name its type, seq and time, and it
 * comes back as an elided event (`event/elided`, reason `line-too-large`).
 * The batch is still checked whole: its plaintext length and CRC32 against
 * its trailer, its event count. Memory stays at the cap plus a chunk.
 */

/** Plaintext bytes decoded at a time. */
const CHUNK = 1024 * 1024
const NEWLINE = Buffer.from('\n')

let binding: typeof Binding | undefined

/** Calls `each` with the plaintext of one unit body, a chunk at a time (the chunk's buffer is reused: copy what is kept). Throws when the body does not decode to its end. */
export function forEachPlainChunk(codec: LogCodec, body: Buffer, each: (chunk: Buffer) => void): void {
  if (codec.compression !== 'zstd') {
    for (let at = 0; at < body.length; at += CHUNK) each(body.subarray(at, Math.min(body.length, at + CHUNK)))
    return
  }
  binding ??= createRequire(import.meta.url)('zstd-napi/binding.js') as typeof Binding
  const ctx = new binding.DCtx()
  const out = Buffer.allocUnsafe(CHUNK)
  let input = body
  for (;;) {
    const [remaining, produced, read] = ctx.decompressStream(out, input)
    input = input.subarray(read)
    if (produced > 0) each(out.subarray(0, produced))
    if (remaining === 0) {
      // The frame is decoded and flushed.
      if (input.length > 0) throw new Error(`${input.length} bytes follow the frame`)
      return
    }
    if (read === 0 && produced === 0) throw new Error('the frame ends before its last block')
  }
}

/** The plaintext length and CRC32 of a unit body, decoded a chunk at a time. */
export function plainDigest(codec: LogCodec, body: Buffer): { length: number; crc: number } {
  let length = 0
  let crc = 0
  forEachPlainChunk(codec, body, (chunk) => {
    length += chunk.length
    crc = crc32(chunk, crc)
  })
  return { length, crc }
}

/**
 * The events of one committed batch read a chunk at a time (its lines over
 * `LINE_MAX_BYTES` elided), pushed onto `into`; returns why the batch does
 * not read back as its trailer records, or `undefined`.
 */
export function decodeLongUnit(
  codec: LogCodec,
  buf: Buffer,
  unit: { readonly bodyStart: number; readonly bodyEnd: number; readonly trailer: TrailerFields },
  into: StoredSessionEvent[],
): string | undefined {
  const { firstSeq, count, plainLength, plainCrc } = unit.trailer
  const start = into.length
  let fault: string | undefined
  const seq = (): number => firstSeq + (into.length - start)
  const lines = new CappedLines(
    (line) => {
      fault ??= parseEventLines(Buffer.concat([line, NEWLINE]), seq(), undefined, into)
    },
    (head, bytes) => {
      if (fault !== undefined) return
      const elided = elidedLineEvents(head, bytes, seq())
      if (typeof elided === 'string') fault = elided
      else into.push(...elided)
    },
  )
  try {
    forEachPlainChunk(codec, buf.subarray(unit.bodyStart, unit.bodyEnd), (chunk) => lines.push(chunk))
  } catch (error) {
    return `the unit does not decode (${(error as Error).message})`
  }
  if (lines.length !== plainLength) return `the unit decodes to ${lines.length} bytes, its trailer records ${plainLength}`
  if (lines.crc !== plainCrc) return 'CRC32 mismatch'
  if (lines.unterminated > 0) return 'the batch does not end with a newline'
  if (fault !== undefined) return fault
  const read = into.length - start
  return read === count ? undefined : `the batch holds ${read} events, its trailer records ${count}`
}
