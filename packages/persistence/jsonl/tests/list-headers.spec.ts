import { mkdirSync, statSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import type { SessionId } from '@dsh/session'
import { createJsonlPersistence, encodeSessionDirName } from '@dsh/session-persistence-jsonl'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createCodec } from '../src/codec.js'
import { encodeHeaderLine } from '../src/log-format.js'
import { encodeUnit } from '../src/log-units.js'
import { eventsFrom, headerOf, tempDir } from './helpers.js'

const SESSIONS = 10_000

describe('list() over 10,000 persisted sessions', () => {
  let root: string
  let cleanup: () => void
  let totalBytes = 0

  beforeAll(async () => {
    ;({ dir: root, cleanup } = tempDir('dsh-jsonl-10k-', { memory: true }))
    // The root and one session go through the backend; the other sessions
    // reuse its batch unit under their own header units (encoded by the
    // backend's own unit encoder), written without fsync to keep the fixture fast.
    const writer = createJsonlPersistence({ root })
    // Chunks of pseudo-random text, so the batch stays a few KiB after compression.
    let state = 42
    const next = (): number => {
      state = (state * 1103515245 + 12345) >>> 0
      return state
    }
    const noise = (): string => Array.from({ length: 24 }, () => (next() >>> 8).toString(36)).join('')
    const body = eventsFrom(0, 40).map((e) =>
      e.type === 'assistant/chunk' ? { ...e, data: { turn: 1, index: e.seq, delta: noise() } } : e,
    )
    await writer.append({ header: headerOf('session-0'), inheritedEventCount: 0 as never }, body)
    await writer.close()
    const codec = createCodec('zstd')
    const batchUnit = await encodeUnit(codec, Buffer.from(body.map((e) => `${JSON.stringify(e)}\n`).join('')), 'batch', 0, body.length)
    totalBytes = statSync(join(root, encodeSessionDirName('session-0'), codec.logFileName)).size
    for (let i = 1; i < SESSIONS; i++) {
      const id = `session-${i}`
      const seeded = i % 3 === 0
      const physical = {
        header: headerOf(
          id,
          seeded
            ? { isSeeded: true, parentSession: `session-${i - 1}` as SessionId, delegationDepth: 1, origin: 'subagent' }
            : { cwd: `/work/${i}` },
        ),
        inheritedEventCount: (seeded ? 7 : 0) as never,
        logId: `log-${i}`,
      }
      const headerUnit = await encodeUnit(codec, encodeHeaderLine(physical), 'header', 0, 0)
      const dir = join(root, encodeSessionDirName(id))
      mkdirSync(dir)
      const bytes = Buffer.concat([headerUnit, batchUnit])
      writeFileSync(join(dir, codec.logFileName), bytes)
      totalBytes += bytes.length
    }
  })

  afterAll(() => cleanup())

  it('reads only header units: no body read, a bounded prefix per log, the exact inherited cut', async () => {
    const p = createJsonlPersistence({ root })
    const records = await p.list()
    expect(records).toHaveLength(SESSIONS)
    expect(p.metrics.headerReads).toBe(SESSIONS)
    expect(p.metrics.bodyReads).toBe(0)
    // Each log holds a batch of several KiB after its header; list reads a 512-byte prefix of each.
    expect(p.metrics.bytesRead).toBeLessThanOrEqual(SESSIONS * 512)
    expect(p.metrics.bytesRead).toBeLessThan(totalBytes / 5)
    const byId = new Map(records.map((r) => [r.header.id as string, r]))
    expect(byId.get('session-3')).toMatchObject({
      inheritedEventCount: 7,
      header: { isSeeded: true, parentSession: 'session-2', origin: 'subagent' },
    })
    expect(byId.get('session-4')).toMatchObject({ inheritedEventCount: 0, header: { isSeeded: false, cwd: '/work/4' } })
    // The records agree with a body-bearing read.
    const inspected = await p.inspect('session-3' as SessionId)
    expect(inspected.revision).toBe(byId.get('session-3')!.revision)
    expect(inspected.events).toHaveLength(40)
    await p.close()
  })
})
