import { crc32 } from 'node:zlib'
import type { LogCodec } from './codec.js'

/** A unit as stored, in two parts: the encoded body, then its trailer (lengths, CRC32s, seq range). */
export function encodeUnitParts(
  codec: LogCodec,
  plain: Buffer,
  kind: 'header' | 'batch',
  firstSeq: number,
  count: number,
): [body: Buffer, trailer: Buffer] {
  const body = kind === 'header' ? codec.encodeHeaderBody(plain) : codec.encodeBody(plain)
  const plainCrc = crc32(plain)
  const bodyCrc = body === plain ? plainCrc : crc32(body)
  return [body, codec.trailer.encode({ kind, plainLength: plain.length, plainCrc, bodyLength: body.length, bodyCrc, firstSeq, count })]
}

/** A unit as stored: the encoded body followed by its trailer. */
export function encodeUnit(codec: LogCodec, plain: Buffer, kind: 'header' | 'batch', firstSeq: number, count: number): Buffer {
  return Buffer.concat(encodeUnitParts(codec, plain, kind, firstSeq, count))
}
