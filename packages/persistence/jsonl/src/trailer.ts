import { crc32 } from 'node:zlib'

/**
 * What closes every unit of a log (the header line and each append batch):
 * the unit's plaintext length and CRC32 (the integrity check — zstd frames
 * from `@mongodb-js/zstd` carry no content checksum), the stored body's
 * length and CRC32 (so a unit can be located from its trailer, and a changed
 * byte that would still decode to the same plaintext — a frame header's
 * window size, say — is caught too) and the seq range. A trailer
 * carries its own CRC too, so a damaged trailer is never mistaken for a
 * valid one and a valid one is never produced by a torn write.
 */
export interface TrailerFields {
  readonly kind: 'header' | 'batch'
  readonly plainLength: number
  readonly plainCrc: number
  readonly bodyLength: number
  /** CRC32 of the stored body (equal to `plainCrc` where the body is the plaintext). */
  readonly bodyCrc: number
  readonly firstSeq: number
  readonly count: number
}

export interface TrailerFormat {
  /** Every trailer of this format has exactly this many bytes. */
  readonly size: number
  encode(fields: TrailerFields): Buffer
  /** The trailer at `pos`, or `undefined` when the bytes there are not a complete, self-consistent trailer. */
  decode(buf: Buffer, pos: number): TrailerFields | undefined
  /** Offsets at or after `from` where a trailer could start (cheap pre-filter for `decode`). */
  candidates(buf: Buffer, from: number): Iterable<number>
}

/** The skippable-frame magic of dsh trailers (one of 0x184D2A50..5F; zstd decoders skip it). */
export const TRAILER_MAGIC = 0x184d2a5d
const MAGIC_BYTES = Buffer.from([0x5d, 0x2a, 0x4d, 0x18])
const PAYLOAD = 44
const KIND_CODES = { header: 1, batch: 2 } as const

/**
 * `zstd` encoding: a 52-byte zstd skippable frame: magic, size 44, then
 * kind u8, layout version u8, 0 u16, plaintext CRC32 u32, body CRC32 u32,
 * event count u32, plaintext length u64, body length u64, first seq u64, and
 * the CRC32 of the 48 bytes before it (little-endian throughout).
 */
export const skippableTrailer: TrailerFormat = {
  size: 8 + PAYLOAD,
  encode(fields) {
    const out = Buffer.allocUnsafe(8 + PAYLOAD)
    out.writeUInt16LE(0, 10)
    out.writeUInt32LE(TRAILER_MAGIC, 0)
    out.writeUInt32LE(PAYLOAD, 4)
    out.writeUInt8(KIND_CODES[fields.kind], 8)
    out.writeUInt8(1, 9) // trailer layout version
    out.writeUInt32LE(fields.plainCrc >>> 0, 12)
    out.writeUInt32LE(fields.bodyCrc >>> 0, 16)
    out.writeUInt32LE(fields.count, 20)
    writeU64(out, fields.plainLength, 24)
    writeU64(out, fields.bodyLength, 32)
    writeU64(out, fields.firstSeq, 40)
    out.writeUInt32LE(crc32(out.subarray(0, 48)), 48)
    return out
  },
  decode(buf, pos) {
    if (pos < 0 || pos + 8 + PAYLOAD > buf.length) return undefined
    if (buf.readUInt32LE(pos) !== TRAILER_MAGIC || buf.readUInt32LE(pos + 4) !== PAYLOAD) return undefined
    if (crc32(buf.subarray(pos, pos + 48)) !== buf.readUInt32LE(pos + 48)) return undefined
    const kindCode = buf.readUInt8(pos + 8)
    const kind = kindCode === 1 ? 'header' : kindCode === 2 ? 'batch' : undefined
    if (kind === undefined || buf.readUInt8(pos + 9) !== 1 || buf.readUInt16LE(pos + 10) !== 0) return undefined
    const plainLength = readU64(buf, pos + 24)
    const bodyLength = readU64(buf, pos + 32)
    const firstSeq = readU64(buf, pos + 40)
    if (plainLength === undefined || bodyLength === undefined || firstSeq === undefined) return undefined
    return {
      kind,
      plainCrc: buf.readUInt32LE(pos + 12),
      bodyCrc: buf.readUInt32LE(pos + 16),
      count: buf.readUInt32LE(pos + 20),
      plainLength,
      bodyLength,
      firstSeq,
    }
  },
  *candidates(buf, from) {
    for (let at = buf.indexOf(MAGIC_BYTES, from); at !== -1; at = buf.indexOf(MAGIC_BYTES, at + 1)) yield at
  },
}

// 64-bit little-endian fields as two 32-bit halves (BigInt conversions are slow on the append path).
function writeU64(out: Buffer, value: number, at: number): void {
  out.writeUInt32LE(value % 0x1_0000_0000, at)
  out.writeUInt32LE(Math.floor(value / 0x1_0000_0000), at + 4)
}

/** A safe integer, or `undefined` when the field is beyond 2^53 - 1. */
function readU64(buf: Buffer, at: number): number | undefined {
  const high = buf.readUInt32LE(at + 4)
  return high < 0x20_0000 ? high * 0x1_0000_0000 + buf.readUInt32LE(at) : undefined
}

/**
 * `none` encoding: one fixed-width JSON line, so line tools (`jq`, `grep`)
 * still work and the trailer is recognisable by its prefix. Event lines
 * always start with `{"type":`, so the prefix never begins an event line.
 */
export const LINE_TRAILER_PREFIX = '{"dsh-trailer":"v1 '
const LINE_PREFIX_BYTES = Buffer.from(LINE_TRAILER_PREFIX)
const LINE_PATTERN =
  /^\{"dsh-trailer":"v1 ([HB]) plain=(\d{12}) body=(\d{12}) first=(\d{16}) count=(\d{10}) crc32=([0-9a-f]{8}) check=([0-9a-f]{8})"\}\n$/

function lineBody(fields: TrailerFields): string {
  return `${LINE_TRAILER_PREFIX}${fields.kind === 'header' ? 'H' : 'B'} plain=${pad(fields.plainLength, 12)} body=${pad(fields.bodyLength, 12)} first=${pad(fields.firstSeq, 16)} count=${pad(fields.count, 10)} crc32=${hex(fields.plainCrc)}`
}

export const lineTrailer: TrailerFormat = {
  size:
    Buffer.byteLength(lineBody({ kind: 'batch', plainLength: 0, plainCrc: 0, bodyLength: 0, bodyCrc: 0, firstSeq: 0, count: 0 })) +
    ' check=00000000"}\n'.length,
  encode(fields) {
    const body = lineBody(fields)
    return Buffer.from(`${body} check=${hex(crc32(body))}"}\n`, 'latin1')
  },
  decode(buf, pos) {
    const size = lineTrailer.size
    if (pos < 0 || pos + size > buf.length) return undefined
    const text = buf.toString('latin1', pos, pos + size)
    const match = LINE_PATTERN.exec(text)
    if (!match) return undefined
    const checked = text.slice(0, text.indexOf(' check='))
    if (crc32(checked) !== parseInt(match[7]!, 16)) return undefined
    return {
      kind: match[1] === 'H' ? 'header' : 'batch',
      plainLength: Number(match[2]),
      bodyLength: Number(match[3]),
      firstSeq: Number(match[4]),
      count: Number(match[5]),
      plainCrc: parseInt(match[6]!, 16),
      // The stored body is the plaintext itself.
      bodyCrc: parseInt(match[6]!, 16),
    }
  },
  *candidates(buf, from) {
    // Not only at line starts: a damaged newline before a trailer must not
    // hide it. The prefix cannot occur inside an event line's JSON: raw quotes
    // only appear structurally there, and a `{"dsh-trailer":"…"}` object in
    // event data is followed by `}}`, never by the `"}\n` a trailer ends with.
    for (let at = buf.indexOf(LINE_PREFIX_BYTES, from); at !== -1; at = buf.indexOf(LINE_PREFIX_BYTES, at + 1)) yield at
  },
}

function pad(n: number, width: number): string {
  const text = String(n)
  if (!Number.isSafeInteger(n) || n < 0 || text.length > width) throw new RangeError(`${n} does not fit a ${width}-digit trailer field`)
  return text.padStart(width, '0')
}

function hex(n: number): string {
  return (n >>> 0).toString(16).padStart(8, '0')
}
