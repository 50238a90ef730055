import { execFileSync } from 'node:child_process'
import { mkdirSync, readFileSync, rmSync, statSync, symlinkSync, truncateSync, writeFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { expandEventRuns, isEventRun } from '@dsh/session-persistence'
import { afterEach, describe, expect, it } from 'vitest'
import { DSH_EVENTS } from '../src/convert.js'
import {
  decodeFrames,
  decodeSegment,
  encodeFrame,
  encodeSegment,
  headerLineText,
  ImportV0Error,
  importV0,
  isV0Root,
  listV0Logs,
  packChunkRuns,
  parseV0Log,
  projectKey,
  readV0Log,
  toDshEvent,
  v0LogBytes,
  v0LogPath,
  writeV0Log,
} from '../src/index.js'
import { openV0Log, TEXT_SLICE } from '../src/reader.js'
import { POOL_GROUP_BYTES, scanFrames } from '../src/zstd-frames.js'
import { CWD, flipByte, flipped, healthyFixtures, PARENT, plainLines, T0, tempDir, V0Builder, writeRoot } from './fixtures.js'

const dirs: string[] = []
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true })
})
function dir(prefix: string): string {
  const d = tempDir(prefix)
  dirs.push(d)
  return d
}

function code(run: () => unknown): string {
  try {
    run()
  } catch (error) {
    if (error instanceof ImportV0Error) return error.code
    throw error
  }
  throw new Error('expected an ImportV0Error')
}

describe('v0 layout', () => {
  it('encodes ids as one safe segment, ~XXXX for every other UTF-16 unit, and decodes them back', () => {
    expect(encodeSegment('abc-1.2_3')).toBe('abc-1.2_3')
    expect(encodeSegment('.')).toBe('~002E')
    expect(encodeSegment('..')).toBe('~002E~002E')
    expect(encodeSegment('a/b')).toBe('a~002Fb')
    expect(encodeSegment('~')).toBe('~007E')
    expect(encodeSegment('ü')).toBe('~00FC')
    expect(encodeSegment('\u{1F600}')).toBe('~D83D~DE00')
    expect(encodeSegment('\uD800')).toBe('~D800')
    for (const id of ['.', '..', 'a/b', '~x', 'task/übung:1 ~ ..', '\uD800lone', 'x'.repeat(255), 'ü'.repeat(51), '\0']) {
      expect(decodeSegment(encodeSegment(id))).toBe(id)
    }
    expect(decodeSegment('~002e')).toBeUndefined()
    expect(decodeSegment('a b')).toBeUndefined()
    expect(code(() => encodeSegment(''))).toBe('IMPORT_V0_INVALID_ID')
    // One segment holds 255 bytes: an id whose encoding is longer has no directory.
    expect(code(() => encodeSegment('x'.repeat(256)))).toBe('IMPORT_V0_INVALID_ID')
    expect(code(() => encodeSegment('ü'.repeat(52)))).toBe('IMPORT_V0_INVALID_ID')
  })

  it('turns runs of separators into one dash, strips leading dashes and caps the key at 251 characters', () => {
    expect(projectKey('/home/dev/proj')).toBe('--home-dev-proj--')
    expect(projectKey('C:\\Users\\dev//x::y')).toBe('--C-Users-dev-x-y--')
    expect(projectKey('/')).toBe('--root--')
    expect(projectKey('/a b')).toBe('--a~0020b--')
    expect(projectKey(`/${'d'.repeat(400)}`)).toBe(`--${'d'.repeat(251)}--`)
    expect(v0LogPath('/r', 'x', undefined, 'zstd')).toBe('/r/_no-cwd/x/session.jsonl.zstd')
    expect(v0LogPath('/r', '..', '/p', 'none')).toBe('/r/--p--/~002E~002E/session.jsonl')
  })
})

describe('v0 frames and lines', () => {
  it('writes frame 0 as the header line alone and one checksummed frame per batch, readable by zstd -dc', async () => {
    const root = dir('frames')
    const b = new V0Builder().turn(1, 'hi', 'hello there').turn(2, 'again', 'and again')
    const path = await writeV0Log(root, { id: 's', createdAt: T0, cwd: CWD, delegationDepth: 0 }, b.batches, { packChunks: false })
    expect(path).toBe(join(root, '--home-dev-projects-dsh-~0020demo--', 's', 'session.jsonl.zstd'))
    expect(statSync(path).mode & 0o777).toBe(0o600)
    expect(statSync(join(root, '--home-dev-projects-dsh-~0020demo--')).mode & 0o777).toBe(0o700)
    const { frames, torn } = decodeFrames(readFileSync(path))
    expect(torn).toBeUndefined()
    expect(frames).toHaveLength(3)
    expect(frames[0]?.toString()).toBe(`${headerLineText({ id: 's', createdAt: T0, cwd: CWD, delegationDepth: 0 })}\n`)
    // Every frame carries the content-checksum flag (bit 2 of the frame header descriptor).
    let offset = 0
    const bytes = readFileSync(path)
    for (let i = 0; i < 3; i++) {
      expect(bytes.readUInt32LE(offset)).toBe(0xfd2fb528)
      expect(bytes[offset + 4]! & 0x04).toBe(0x04)
      offset = bytes.indexOf(Buffer.from([0x28, 0xb5, 0x2f, 0xfd]), offset + 4)
      if (offset < 0) break
    }
    const viaTool = execFileSync('zstd', ['-dc', path])
    expect(plainLines(viaTool)).toEqual([
      headerLineText({ id: 's', createdAt: T0, cwd: CWD, delegationDepth: 0 }),
      ...b.events.map((e) => JSON.stringify(e)),
    ])
    const log = await readV0Log(root, { path, compression: 'zstd', dirId: 's' })
    expect(log.events).toEqual(b.events)
    expect(log.tornBytes).toBe(0)
  })

  it('packs runs of at least three same-block deltas into rows and expands them back exactly', () => {
    const b = new V0Builder().turn(1, 'q', 'a fairly long answer that streams in many pieces', { reasoning: true, tool: true })
    const records = packChunkRuns(b.events) as { type: string }[]
    expect(records.map((r) => r.type)).toContain('text-chunks')
    expect(records.map((r) => r.type)).toContain('reasoning-chunks')
    expect(records.length).toBeLessThan(b.events.length)
    for (const compression of ['zstd', 'none'] as const) {
      const bytes = v0LogBytes({ id: 'p', createdAt: T0, delegationDepth: 0 }, b.batches, { compression })
      const log = parseV0Log(bytes, compression)
      expect(log.packedRows).toBe(2)
      expect(log.events).toEqual(b.events)
      // Row members take a shortcut through the converter; it must agree with the general path.
      for (const event of log.events) expect(toDshEvent(event)).toEqual(toDshEvent(JSON.parse(JSON.stringify(event))))
    }
    const tool = new V0Builder()
    for (const piece of ['{"pa', 'th":', '"x"}'])
      tool.add('assistant/chunk', {
        turn: 1,
        step: 0,
        chunk: { type: 'tool-call-delta', index: 2, id: 'c1', name: 'read', argumentsDelta: piece },
      })
    const rows = packChunkRuns(tool.events) as { type: string; data: { name?: string; args: string[] } }[]
    expect(rows).toEqual([
      expect.objectContaining({
        type: 'tool-call-chunks',
        data: expect.objectContaining({ name: 'read', args: ['{"pa', 'th":', '"x"}'] }),
      }),
    ])
    expect(parseV0Log(v0LogBytes({ id: 't', createdAt: T0, delegationDepth: 0 }, tool.batches), 'zstd').events).toEqual(tool.events)
  })

  it('reads rows straight into dsh events equal to converting their v0 members (text at step 0 and 2, reasoning, tool calls)', async () => {
    const b = new V0Builder().turn(1, 'q', 'a fairly long answer that streams in many pieces', { reasoning: true, tool: true })
    for (const step of [2, 0])
      for (const piece of ['{"pa', 'th":', '"x"}'])
        b.add('assistant/chunk', { turn: 1, step, chunk: { type: 'tool-call-delta', index: 2, id: `c${step}`, argumentsDelta: piece } })
    for (const piece of ['later ', 'step ', 'text'])
      b.add('assistant/chunk', { turn: 1, step: 2, chunk: { type: 'text-delta', index: 0, text: piece } })
    b.flush()
    const root = dir('dsh-rows')
    const path = await writeV0Log(root, { id: 'r', createdAt: T0, delegationDepth: 0 }, b.batches)
    const reader = await openV0Log(root, { path, compression: 'zstd', dirId: 'r' }, DSH_EVENTS)
    const events = []
    do for (let event = reader.next(); event !== undefined; event = reader.next()) events.push(event)
    while (await reader.more())
    expect(reader.packedRows).toBe(5)
    // The text rows of step 0 come as runs of events given as columns; the other rows as their member events.
    expect(events.filter(isEventRun).length).toBeGreaterThan(0)
    expect(events.filter(isEventRun).every((run) => run.type === 'assistant/chunk' && run.run.data.delta !== undefined)).toBe(true)
    const expanded = expandEventRuns('r', events)
    expect(expanded).toEqual(b.events.map(toDshEvent))
    expect(expanded.every((e) => Object.isFrozen(e) && Object.isFrozen(e.data))).toBe(true)
  })

  it('keeps the complete records of a torn last frame, as the harness reads it', () => {
    const b = new V0Builder().turn(1, 'q', 'answer').turn(2, 'q2', 'x'.repeat(200_000))
    const full = v0LogBytes({ id: 't', createdAt: T0, delegationDepth: 0 }, b.batches, { packChunks: false })
    const lastFrameStart =
      full.length -
      (v0LogBytes({ id: 't', createdAt: T0, delegationDepth: 0 }, [b.batches[1]!], { packChunks: false }).length -
        v0LogBytes({ id: 't', createdAt: T0, delegationDepth: 0 }, [], { packChunks: false }).length)
    const firstTurn = b.batches[0]!.length
    // Cut the last frame short: a crash while appending it.
    const torn = parseV0Log(full.subarray(0, full.length - 9), 'zstd')
    expect(torn.tornBytes).toBe(full.length - 9 - lastFrameStart)
    expect(torn.events.length).toBeGreaterThan(firstTurn)
    expect(torn.events.length).toBeLessThan(b.events.length)
    expect(torn.events).toEqual(b.events.slice(0, torn.events.length))
    // A tear right after the magic keeps exactly the complete frames.
    const justMagic = parseV0Log(full.subarray(0, lastFrameStart + 4), 'zstd')
    expect(justMagic.events).toEqual(b.events.slice(0, firstTurn))
    // Plain logs: a last line without its newline is the torn tail.
    const plain = v0LogBytes({ id: 't', createdAt: T0, delegationDepth: 0 }, b.batches, { packChunks: false, compression: 'none' })
    const plainTorn = parseV0Log(plain.subarray(0, plain.length - 5), 'none')
    expect(plainTorn.events).toEqual(b.events.slice(0, -1))
    expect(plainTorn.tornBytes).toBe(JSON.stringify(b.events.at(-1)).length + 1 - 5)
  })

  it('says what a torn frame lost: nothing when only its checksum is cut, else the text beyond the lines kept', async () => {
    const b = new V0Builder().turn(1, 'q', 'answer').turn(2, 'q2', 'x'.repeat(5_000))
    const header = { id: 'cut-checksum', createdAt: T0, delegationDepth: 0 }
    const full = v0LogBytes(header, b.batches, { packChunks: false })
    const lastFrame =
      v0LogBytes(header, [b.batches[1]!], { packChunks: false }).length - v0LogBytes(header, [], { packChunks: false }).length
    const lastText = Buffer.from(`${b.batches[1]!.map((e) => JSON.stringify(e)).join('\n')}\n`)
    // The 4-byte checksum alone is missing: every record of the frame is kept, nothing skipped.
    const noChecksum = parseV0Log(full.subarray(0, full.length - 4), 'zstd')
    expect(noChecksum.events).toEqual(b.events)
    expect({ tornBytes: noChecksum.tornBytes, skippedBytes: noChecksum.skippedBytes }).toEqual({
      tornBytes: lastFrame - 4,
      skippedBytes: 0,
    })
    // Cut inside the last block: what is skipped is the frame's text past the complete lines kept.
    const cut = parseV0Log(full.subarray(0, full.length - 40), 'zstd')
    const keptOfLast = cut.events.length - b.batches[0]!.length
    expect(keptOfLast).toBeLessThan(b.batches[1]!.length)
    const keptText = b.batches[1]!.slice(0, keptOfLast).reduce((bytes, e) => bytes + Buffer.byteLength(JSON.stringify(e)) + 1, 0)
    expect(cut.skippedBytes).toBe(lastText.length - keptText)
    // An import reports what was skipped, and nothing for a frame cut only in its checksum.
    const root = dir('torn-report')
    for (const [id, drop] of [
      ['cut-checksum', 4],
      ['cut-block', 40],
    ] as const) {
      const path = await writeV0Log(root, { ...header, id }, b.batches, { packChunks: false })
      truncateSync(path, statSync(path).size - drop)
    }
    const report = await importV0({ from: root, dryRun: true })
    expect(report.sessions.map((s) => [s.id, s.status, s.events, s.tornBytes])).toEqual([
      ['cut-block', 'imported', cut.events.length, lastText.length - keptText],
      ['cut-checksum', 'imported', b.events.length, undefined],
    ])
  })

  it('reads a prefix of the events at every truncation point (a crash anywhere), never a wrong event', () => {
    const b = new V0Builder().turn(1, 'q', 'first answer, streamed').turn(2, 'q2', 'second answer', { tool: true })
    const header = { id: 'cut', createdAt: T0, delegationDepth: 0 }
    for (const compression of ['zstd', 'none'] as const) {
      const full = v0LogBytes(header, b.batches, { compression })
      const headerBytes = v0LogBytes(header, [], { compression }).length
      // Where complete units end: frames for zstd, lines for plain logs.
      const ends: number[] = []
      if (compression === 'zstd') {
        let at = headerBytes
        ends.push(at)
        for (const batch of b.batches) {
          if (batch.length === 0) continue
          at += v0LogBytes(header, [batch], { compression }).length - headerBytes
          ends.push(at)
        }
      } else {
        for (let i = full.indexOf(0x0a); i >= 0; i = full.indexOf(0x0a, i + 1)) ends.push(i + 1)
      }
      let longest = 0
      for (let cut = 0; cut <= full.length; cut++) {
        if (cut < headerBytes) {
          expect(code(() => parseV0Log(full.subarray(0, cut), compression))).toBe('IMPORT_V0_BAD_HEADER')
          continue
        }
        const log = parseV0Log(full.subarray(0, cut), compression)
        expect(log.events).toEqual(b.events.slice(0, log.events.length))
        expect(log.events.length).toBeGreaterThanOrEqual(longest)
        longest = log.events.length
        expect(log.tornBytes).toBe(cut - Math.max(...ends.filter((end) => end <= cut)))
      }
      expect(longest).toBe(b.events.length)
    }
  })

  it('reads logs whose text is longer than one decoded slice, lines longer than a slice included', () => {
    const b = new V0Builder()
    b.add('turn/start', { turn: 1 })
    b.add('x/big', { blob: 'y'.repeat(TEXT_SLICE + 1000) })
    for (let i = 0; i < 50; i++) b.add('x/small', { i, pad: 'z'.repeat(1_000_000) })
    b.add('turn/end', { turn: 1, reason: { kind: 'completed' } })
    b.flush()
    for (const compression of ['zstd', 'none'] as const) {
      const log = parseV0Log(
        v0LogBytes({ id: 'big', createdAt: T0, delegationDepth: 0 }, b.batches, { compression, packChunks: false }),
        compression,
      )
      expect(log.events.length).toBe(b.events.length)
      expect(log.events.map((e) => e.seq)).toEqual(b.events.map((e) => e.seq))
      expect((log.events[1]!.data as { blob: string }).blob.length).toBe(TEXT_SLICE + 1000)
    }
  }, 300_000) // bounded by bytes; the timeout only guards a hang

  it('reads frames decoded on the pool ahead of it: the events a whole read gives, a damaged late frame after the events before it', async () => {
    // 12 frames of about a third of a pool group each (several groups), then a torn 13th.
    const b = new V0Builder()
    for (let turn = 1; turn <= 13; turn++) {
      b.add('x/pad', { turn, pad: `${turn}`.repeat(Math.floor(POOL_GROUP_BYTES / 3)) })
      b.turn(turn, 'q', `answer ${turn}`)
    }
    const root = dir('dsh-pooled')
    const path = await writeV0Log(root, { id: 'p', createdAt: T0, delegationDepth: 0 }, b.batches, { packChunks: true })
    const full = readFileSync(path)
    const { spans } = scanFrames(full)
    expect(spans).toHaveLength(14)
    const last = spans[13]!
    const read = async (bytes: Buffer): Promise<{ events: number[]; code?: string; tornBytes: number }> => {
      writeFileSync(path, bytes)
      const reader = await openV0Log(root, { path, compression: 'zstd', dirId: 'p' })
      const events: number[] = []
      try {
        do for (let event = reader.next(); event !== undefined; event = reader.next()) events.push(event.seq)
        while (await reader.more())
      } catch (error) {
        return { events, code: (error as ImportV0Error).code, tornBytes: reader.tornBytes }
      }
      return { events, tornBytes: reader.tornBytes }
    }
    const torn = full.subarray(0, last.offset + Math.floor(last.size / 2))
    const whole = parseV0Log(torn, 'zstd')
    expect(whole.events.length).toBeGreaterThan(0)
    expect(await read(torn)).toEqual({ events: whole.events.map((e) => e.seq), tornBytes: whole.tornBytes })
    const untorn = await read(full)
    expect(untorn.events).toEqual(b.events.map((e) => e.seq))
    // A frame's checksum, a byte of its frame header: the same typed reasons as a whole read, after every event of the frames
    // before it (frame 10 starts a pool group, frame 11 is inside one).
    for (const frame of [10, 11]) {
      const before = b.batches.slice(0, frame - 1).flat().length
      const span = spans[frame]!
      for (const [at, mask, expected] of [
        [span.offset + span.size - 1, 0x01, 'IMPORT_V0_CHECKSUM_MISMATCH'],
        [span.offset + 6, 0x06, 'IMPORT_V0_DAMAGED_FRAME'],
      ] as const) {
        const damaged = flipped(full, at, mask)
        expect(code(() => parseV0Log(damaged, 'zstd'))).toBe(expected)
        expect(await read(damaged)).toEqual({ events: b.events.slice(0, before).map((e) => e.seq), code: expected, tornBytes: 0 })
      }
      // A frame that decodes but ends inside a line.
      const plain = decodeFrames(full).frames[frame]!
      const cut = Buffer.concat([
        full.subarray(0, span.offset),
        encodeFrame(plain.subarray(0, plain.length - 1)),
        full.subarray(span.offset + span.size),
      ])
      expect(code(() => parseV0Log(cut, 'zstd'))).toBe('IMPORT_V0_BAD_JSON')
      expect(await read(cut)).toEqual({ events: b.events.slice(0, before).map((e) => e.seq), code: 'IMPORT_V0_BAD_JSON', tornBytes: 0 })
    }
  }, 300_000) // bounded by bytes; the timeout only guards a hang

  it('reports damage in a complete frame with a typed reason', () => {
    const b = new V0Builder().turn(1, 'q', 'answer one').turn(2, 'q', 'answer two')
    const header = { id: 'd', createdAt: T0, delegationDepth: 0 }
    const full = v0LogBytes(header, b.batches, { packChunks: false })
    const headerBytes = v0LogBytes(header, []).length
    const firstBatch = v0LogBytes(header, [b.batches[0]!], { packChunks: false }).length - headerBytes
    // The last 4 bytes of a frame are its content checksum.
    const badChecksum = flipped(full, headerBytes + firstBatch - 1, 0x01)
    expect(code(() => parseV0Log(badChecksum, 'zstd'))).toBe('IMPORT_V0_CHECKSUM_MISMATCH')
    // A flipped byte inside the frame's compressed body.
    expect(code(() => parseV0Log(flipped(full, headerBytes + Math.floor(firstBatch / 2)), 'zstd'))).toBe('IMPORT_V0_CHECKSUM_MISMATCH')
    // A flipped byte in the frame or first block header: the frame no longer decodes.
    expect(code(() => parseV0Log(flipped(full, headerBytes + 6, 0x06), 'zstd'))).toBe('IMPORT_V0_DAMAGED_FRAME')
    expect(code(() => parseV0Log(Buffer.from('\x1f\x8b\x08\x00not zstd at all'), 'zstd'))).toBe('IMPORT_V0_FOREIGN_MAGIC')
    // A skippable frame (what a dsh log carries as its batch trailer) is foreign to v0.
    const skippable = Buffer.concat([full, Buffer.from([0x50, 0x2a, 0x4d, 0x18, 4, 0, 0, 0, 1, 2, 3, 4])])
    expect(code(() => parseV0Log(skippable, 'zstd'))).toBe('IMPORT_V0_FOREIGN_MAGIC')
  })

  it('reports bad JSON, seq gaps, bad rows and bad headers', () => {
    const header = `${headerLineText({ id: 'j', createdAt: T0, delegationDepth: 0 })}\n`
    const line = (seq: number): string => `${JSON.stringify({ type: 'turn/start', seq, time: T0, data: { turn: 1 } })}\n`
    expect(code(() => parseV0Log(Buffer.from(`${header}${line(0)}{"type":\n${line(2)}`), 'none'))).toBe('IMPORT_V0_BAD_JSON')
    expect(code(() => parseV0Log(Buffer.from(`${header}${line(0)}[1]\n`), 'none'))).toBe('IMPORT_V0_BAD_JSON')
    expect(code(() => parseV0Log(Buffer.from(`${header}${line(0)}${line(2)}`), 'none'))).toBe('IMPORT_V0_SEQ_GAP')
    expect(code(() => parseV0Log(Buffer.from(`${header}${line(1)}`), 'none'))).toBe('IMPORT_V0_SEQ_GAP')
    const row = { type: 'text-chunks', seq0: 1, time0: T0, data: { turn: 1, step: 0, index: 0, dt: [1], texts: ['a', 'b', 'c'] } }
    expect(code(() => parseV0Log(Buffer.from(`${header}${line(0)}${JSON.stringify(row)}\n`), 'none'))).toBe('IMPORT_V0_BAD_ROW')
    expect(code(() => parseV0Log(Buffer.from('{"type":"session","version":1,"id":"x","createdAt":1,"delegationDepth":0}\n'), 'none'))).toBe(
      'IMPORT_V0_UNSUPPORTED_VERSION',
    )
    expect(code(() => parseV0Log(Buffer.from('{"type":"session","version":0,"id":"x","createdAt":1}\n'), 'none'))).toBe(
      'IMPORT_V0_BAD_HEADER',
    )
    expect(
      code(() =>
        parseV0Log(Buffer.from('{"type":"session","version":0,"id":"x","createdAt":1,"delegationDepth":0,"sandboxMode":"x"}\n'), 'none'),
      ),
    ).toBe('IMPORT_V0_BAD_HEADER')
    expect(
      code(() =>
        parseV0Log(Buffer.from('{"type":"session","version":0,"id":"x","createdAt":1,"delegationDepth":0,"cwd":"rel"}\n'), 'none'),
      ),
    ).toBe('IMPORT_V0_BAD_HEADER')
    expect(code(() => parseV0Log(Buffer.alloc(0), 'zstd'))).toBe('IMPORT_V0_BAD_HEADER')
  })

  it('lists every log of a root and refuses a log the header does not place there', async () => {
    const fixtures = healthyFixtures()
    const root = await writeRoot(fixtures)
    dirs.push(root)
    const entries = await listV0Logs(root)
    expect(entries.map((e) => e.dirId).sort()).toEqual(fixtures.map((f) => f.header.id).sort())
    expect(await isV0Root(root)).toBe(true)
    // Symlinks are not followed out of the root: a linked session directory or log is not listed.
    const outside = dir('outside')
    const linked = await writeV0Log(outside, { id: 'linked', createdAt: T0, cwd: CWD, delegationDepth: 0 }, [])
    symlinkSync(dirname(linked), join(root, '--home-dev-projects-dsh-~0020demo--', 'linked'))
    mkdirSync(join(root, '_no-cwd', 'link-file'), { recursive: true })
    symlinkSync(linked, join(root, '_no-cwd', 'link-file', 'session.jsonl.zstd'))
    expect((await listV0Logs(root)).map((e) => e.dirId)).not.toContain('linked')
    expect((await listV0Logs(root)).map((e) => e.dirId)).not.toContain('link-file')
    expect(await isV0Root(join(root, 'missing'))).toBe(false)
    expect(await isV0Root(dir('empty'))).toBe(false)
    const parent = entries.find((e) => e.dirId === PARENT)!
    // The same log copied under another id's directory.
    const elsewhere = join(root, '--home-dev-projects-dsh-~0020demo--', 'someone-else', 'session.jsonl.zstd')
    await writeV0Log(root, { id: 'someone-else', createdAt: T0, cwd: CWD, delegationDepth: 0 }, [])
    writeFileSync(elsewhere, readFileSync(parent.path))
    await expect(readV0Log(root, { path: elsewhere, compression: 'zstd', dirId: 'someone-else' })).rejects.toMatchObject({
      code: 'IMPORT_V0_MISPLACED',
    })
    // Truncating inside frame 0 leaves no header.
    truncateSync(parent.path, 10)
    await expect(readV0Log(root, parent)).rejects.toMatchObject({ code: 'IMPORT_V0_BAD_HEADER' })
    flipByte(elsewhere, 0)
    await expect(readV0Log(root, { path: elsewhere, compression: 'zstd', dirId: 'someone-else' })).rejects.toMatchObject({
      code: 'IMPORT_V0_FOREIGN_MAGIC',
    })
  })
})
