import { closeSync, openSync, writeSync } from 'node:fs'
import { createRequire } from 'node:module'
import { crc32 } from 'node:zlib'
import type * as Binding from 'zstd-napi/binding.js'
import { createCodec } from '../src/codec.js'

/*
 * A batch holding one event line of any size, appended to a zstd log by hand
 * and generated a chunk at a time: what a log written before the event cap
 * (or by another writer) may hold, which no append of this package writes.
 * Neither the test process nor the batch's body ever holds the line whole.
 */

const binding = createRequire(import.meta.url)('zstd-napi/binding.js') as typeof Binding
const MiB = 1024 * 1024

/**
 * Appends to the (unpadded) zstd log `file` one committed batch of events
 * from `seq`, one per entry of `textBytes`:
 * `{"type":type,"seq":…,"time":time,"data":{"text":"xxx…"}}`, the text that
 * many bytes long. The body is one zstd frame, streamed; the trailer records
 * its lengths and CRC32s as the writer's would. Returns the plaintext length.
 */
export function appendLongLineBatch(file: string, seq: number, time: number, textBytes: number | number[], type = 'user/message'): number {
  const texts = typeof textBytes === 'number' ? [textBytes] : textBytes
  const suffix = Buffer.from('"}}\n')
  const cctx = new binding.CCtx()
  cctx.setParameter(binding.CParameter.compressionLevel, 1)
  const body: Buffer[] = []
  const out = Buffer.allocUnsafe(binding.cStreamOutSize())
  let plainCrc = 0
  let plainLength = 0
  const feed = (input: Buffer, last: boolean): void => {
    plainCrc = crc32(input, plainCrc)
    plainLength += input.length
    let rest = input
    for (;;) {
      const [remaining, produced, consumed] = cctx.compressStream2(
        out,
        rest,
        last ? binding.EndDirective.end : binding.EndDirective.continue,
      )
      if (produced > 0) body.push(Buffer.from(out.subarray(0, produced)))
      rest = rest.subarray(consumed)
      if (last ? remaining === 0 : rest.length === 0) break
    }
  }
  const filler = Buffer.alloc(MiB, 'x')
  texts.forEach((bytes, k) => {
    feed(Buffer.from(`{"type":${JSON.stringify(type)},"seq":${seq + k},"time":${time},"data":{"text":"`), false)
    for (let left = bytes; left > 0; left -= MiB) feed(filler.subarray(0, Math.min(MiB, left)), false)
    feed(suffix, k === texts.length - 1)
  })
  const frame = Buffer.concat(body)
  const trailer = createCodec('zstd').trailer.encode({
    kind: 'batch',
    plainLength,
    plainCrc,
    bodyLength: frame.length,
    bodyCrc: crc32(frame),
    firstSeq: seq,
    count: texts.length,
  })
  const fd = openSync(file, 'a')
  try {
    writeSync(fd, frame)
    writeSync(fd, trailer)
  } finally {
    closeSync(fd)
  }
  return plainLength
}
