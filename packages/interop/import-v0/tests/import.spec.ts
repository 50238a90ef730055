import { execFileSync } from 'node:child_process'
import { createHash } from 'node:crypto'
import { readdirSync, readFileSync, rmSync, statSync, truncateSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { SessionId } from '@dsh/session'
import { createMemoryPersistence, type SessionPersistence } from '@dsh/session-persistence'
import { createJsonlPersistence } from '@dsh/session-persistence-jsonl'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { packChunkRuns } from '../src/chunk-rows.js'
import { YIELD_EVERY } from '../src/import.js'
import { appendV0Batch, type ImportV0Report, importV0, toDshEvent, v0LogBytes, v0LogPath, writeV0Log } from '../src/index.js'
import { TEXT_SLICE } from '../src/reader.js'
import { POOL_GROUP_BYTES, scanFrames } from '../src/zstd-frames.js'
import {
  CORRUPT_DESCRIPTOR,
  ESCAPED,
  type Fixture,
  FORKED_CONTINUABLE,
  FORKED_ONE_SHOT,
  FRESH_CONTINUABLE,
  flipByte,
  healthyFixtures,
  PARENT,
  T0,
  tempDir,
  UNKNOWN_TYPES,
  V0Builder,
  writeRoot,
} from './fixtures.js'

const dirs: string[] = []
const open: SessionPersistence[] = []
afterEach(async () => {
  for (const p of open.splice(0)) await p.close()
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true })
})

/** The real backends the import writes into: JSONL files, and the in-memory reference backend of the contract. */
const BACKENDS = {
  jsonl: (): SessionPersistence => {
    const root = tempDir('dsh')
    dirs.push(root)
    return createJsonlPersistence({ root })
  },
  memory: (): SessionPersistence => createMemoryPersistence(),
}
let backend: keyof typeof BACKENDS = 'jsonl'

function persistence(): SessionPersistence {
  const p = BACKENDS[backend]()
  open.push(p)
  return p
}

async function v0Root(): Promise<{ root: string; fixtures: ReturnType<typeof healthyFixtures> }> {
  const fixtures = healthyFixtures()
  const root = await writeRoot(fixtures)
  dirs.push(root)
  return { root, fixtures }
}

/** Every file under `dir` with its bytes' digest and mtime: the v0 root must come out of an import unchanged. */
function snapshot(dir: string): Record<string, string> {
  const out: Record<string, string> = {}
  const walk = (d: string): void => {
    for (const entry of readdirSync(d, { withFileTypes: true })) {
      const path = join(d, entry.name)
      if (entry.isDirectory()) walk(path)
      else out[path] = `${createHash('sha256').update(readFileSync(path)).digest('hex')}@${statSync(path).mtimeMs}`
    }
  }
  walk(dir)
  return out
}

/** The inherited cut of a fixture session. */
function fixtureCut(id: string | undefined): number {
  return healthyFixtures().find((f) => f.header.id === id)?.header.seedLength ?? 0
}

/**
 * The items an import reads from `fixture`'s events at seq `from` on: one per
 * event, one per packed `text-chunks` row of step 0 that starts there (a run),
 * one per member of any other row.
 */
function itemsFrom(fixture: Fixture, from: number): number {
  let items = 0
  for (const batch of fixture.builder.batches) {
    const records = (fixture.packChunks ? packChunkRuns(batch) : batch) as {
      type: string
      seq?: number
      seq0?: number
      data: { step?: number; texts?: unknown[]; args?: unknown[] }
    }[]
    for (const record of records) {
      if (record.seq !== undefined) items += record.seq >= from ? 1 : 0
      else if (record.type === 'text-chunks' && record.data.step === 0 && record.seq0! >= from) items += 1
      else {
        const members = (record.data.texts ?? record.data.args)!.length
        for (let k = 0; k < members; k++) items += record.seq0! + k >= from ? 1 : 0
      }
    }
  }
  return items
}

function byId(report: ImportV0Report, id: string) {
  const result = report.sessions.find((s) => s.id === id)
  if (result === undefined) throw new Error(`no result for ${id}`)
  return result
}

describe.each(Object.keys(BACKENDS) as (keyof typeof BACKENDS)[])('importV0 into %s persistence', (name) => {
  beforeEach(() => {
    backend = name
  })

  it('imports every session with its lineage, converts the core types and keeps everything else by name', async () => {
    const { root, fixtures } = await v0Root()
    const before = snapshot(root)
    const p = persistence()
    const progress: number[] = []
    const report = await importV0({ from: root, persistence: p, onProgress: (e) => progress.push(e.done) })
    expect(report).toMatchObject({ imported: fixtures.length, updated: 0, unchanged: 0, failed: 0 })
    expect(progress.at(-1)).toBe(fixtures.length)
    expect(snapshot(root)).toEqual(before)

    const records = await p.list()
    expect(records.map((r) => r.header.id).sort()).toEqual(fixtures.map((f) => f.header.id).sort())
    for (const fixture of fixtures) {
      const observation = await p.inspect(SessionId(fixture.header.id))
      const h = fixture.header
      expect(observation.header).toEqual({
        version: 1,
        id: h.id,
        createdAt: h.createdAt,
        ...(h.cwd === undefined ? {} : { cwd: h.cwd }),
        ...(h.parentSession === undefined ? {} : { parentSession: h.parentSession }),
        isSeeded: h.seedLength !== undefined,
        delegationDepth: h.delegationDepth,
        ...(h.origin === undefined ? {} : { origin: h.origin }),
        ...(h.agentPreset === undefined ? {} : { agentPreset: h.agentPreset }),
      })
      expect(observation.inheritedEventCount).toBe(h.seedLength ?? 0)
      expect(observation.events).toEqual(fixture.builder.events.map(toDshEvent))
      expect(byId(report, h.id).events).toBe(fixture.builder.events.length)
    }
    // Forks whose inherited prefix equals their imported parent's are appended as references to it.
    expect(byId(report, FORKED_ONE_SHOT).forkSource).toBe(PARENT)
    expect(byId(report, FORKED_CONTINUABLE).forkSource).toBe(PARENT)
    expect(byId(report, FRESH_CONTINUABLE).forkSource).toBeUndefined()
    if ('logPath' in p) {
      // The JSONL backend stores such a fork as a reference: its log holds its own 7 events, not the parent's 35 again.
      const jsonl = p as unknown as { logPath(id: string): string; verify(id: string): Promise<{ events: number; forkSource?: string }> }
      const size = (id: string): number => statSync(jsonl.logPath(id)).size
      expect(size(FORKED_ONE_SHOT)).toBeLessThan(size(PARENT))
      expect(await jsonl.verify(FORKED_ONE_SHOT)).toMatchObject({ forkSource: PARENT })
    }

    const parent = await p.inspect(SessionId(PARENT))
    const types = new Set(parent.events.map((e) => e.type))
    for (const type of [
      'turn/start',
      'turn/end',
      'user/message',
      'assistant/chunk',
      'assistant/message',
      'tool/call',
      'tool/result',
      'step/start',
      'v0/assistant/chunk',
      'v0/event',
    ]) {
      expect(types).toContain(type)
    }
    // request/header carries `ignorable` in its envelope, which a dsh event has no place for: it is kept as the whole line.
    expect(parent.events.find((e) => e.type === 'v0/event')?.data).toMatchObject({ type: 'request/header', ignorable: true })
    const user = parent.events.find((e) => e.type === 'user/message')!
    expect(user.data).toMatchObject({ text: 'Plan the release.' })
    const end = parent.events.find((e) => e.type === 'turn/end')!
    expect(end.data).toMatchObject({ turn: 1, reason: 'completed', v0: { reason: { kind: 'completed' } } })
    const call = parent.events.find((e) => e.type === 'tool/call')!
    expect(call.data).toMatchObject({ callId: 'call-1', name: 'read_file', arguments: { path: 'README.md' } })
    const result = parent.events.find((e) => e.type === 'tool/result')!
    expect(result.data).toMatchObject({ callId: 'call-1', content: [{ type: 'text', text: '# dsh\nDurable sessions.' }], isError: false })
    const message = parent.events.find((e) => e.type === 'assistant/message')!
    expect(message.data).toMatchObject({ turn: 1, text: 'Here is a plan in three steps.', usage: { input: 120, output: 40 } })
    const delta = parent.events.find((e) => e.type === 'assistant/chunk')!
    // A step-0 text delta needs no residual: it is exactly our chunk.
    expect(delta.data).toEqual({ turn: 1, index: 1, delta: 'Here i' })

    // Descriptors pass through as-is for the subagent unit to interpret.
    const fresh = await p.inspect(SessionId(FRESH_CONTINUABLE))
    expect(fresh.events.find((e) => e.type === 'subagent/descriptor')?.data).toEqual({
      version: 2,
      mode: 'continuable',
      provider: 'inprocess',
      label: 'researcher',
      agentModel: 'deepseek-reasoner',
      persona: 'terse',
      toolFilter: { allow: ['read_file'] },
    })
    const unknown = await p.inspect(SessionId(UNKNOWN_TYPES))
    expect(unknown.events.map((e) => e.type)).toEqual([
      'turn/start',
      'plugin/custom',
      'todo/write',
      'session/end-seed',
      'v0/event',
      'turn/end',
    ])
    expect(unknown.events[1]?.data).toEqual({ anything: [1, 'two', { three: null }] })
    expect(unknown.events.at(-1)?.data).toMatchObject({ reason: 'cancelled' })
    expect((await p.inspect(SessionId(ESCAPED))).header.cwd).toBeUndefined()
  })

  it('is idempotent: a second run appends nothing (measured), a grown session gets only its new events', async () => {
    const { root, fixtures } = await v0Root()
    const p = persistence()
    await importV0({ from: root, persistence: p })
    const appendsAfterFirst = p.metrics.appends

    const again = await importV0({ from: root, persistence: p })
    expect(again).toMatchObject({ imported: 0, updated: 0, unchanged: fixtures.length, failed: 0, appends: 0 })
    expect(p.metrics.appends).toBe(appendsAfterFirst)

    // The parent grows by one turn in the harness.
    const parent = fixtures[0]!
    const grown = new V0Builder(T0 + 10_000)
    const base = parent.builder.events.length
    grown.seed(parent.builder.events).turn(3, 'More?', 'Yes, more.', { requestHeader: false })
    const suffix = grown.events.slice(base)
    await appendV0Batch(parent.path!, suffix, { packChunks: true })
    const third = await importV0({ from: root, persistence: p })
    expect(third).toMatchObject({ imported: 0, updated: 1, unchanged: fixtures.length - 1, failed: 0, appends: 1 })
    expect(byId(third, PARENT)).toMatchObject({ status: 'updated', appended: suffix.length, events: base + suffix.length })
    expect(p.metrics.appends).toBe(appendsAfterFirst + 1)
    expect((await p.inspect(SessionId(PARENT))).events).toEqual(grown.events.map(toDshEvent))
  })

  it('reports a session whose imported prefix changed as a conflict and leaves it as it was', async () => {
    const { root, fixtures } = await v0Root()
    const p = persistence()
    await importV0({ from: root, persistence: p })
    const fresh = fixtures.find((f) => f.header.id === FRESH_CONTINUABLE)!
    const before = await p.inspect(SessionId(FRESH_CONTINUABLE))
    // The harness log was rewritten: same id and header, one answer edited.
    const edited = new V0Builder(T0 + 1000).childTurn(
      1,
      {
        version: 2,
        mode: 'continuable',
        provider: 'inprocess',
        label: 'researcher',
        agentModel: 'deepseek-reasoner',
        persona: 'terse',
        toolFilter: { allow: ['read_file'] },
      },
      'Found something else.',
    )
    rmSync(fresh.path!)
    await writeV0Log(root, fresh.header, edited.batches, { packChunks: false })
    const appends = p.metrics.appends
    const report = await importV0({ from: root, persistence: p })
    expect(byId(report, FRESH_CONTINUABLE)).toMatchObject({ status: 'failed', reason: { code: 'IMPORT_V0_CONFLICT' } })
    expect(byId(report, FRESH_CONTINUABLE).reason?.message).toMatch(/Event \d+ was imported earlier with other content/)
    expect(report).toMatchObject({ unchanged: fixtures.length - 1, failed: 1 })
    expect(p.metrics.appends).toBe(appends)
    expect((await p.inspect(SessionId(FRESH_CONTINUABLE))).events).toEqual(before.events)

    // A log that shrank, and another lifecycle under an imported id, are conflicts too.
    rmSync(fresh.path!)
    await writeV0Log(root, fresh.header, [edited.events.slice(0, 2)], { packChunks: false })
    expect(byId(await importV0({ from: root, persistence: p }), FRESH_CONTINUABLE).reason?.message).toMatch(/now holds only 2/)
    rmSync(fresh.path!)
    await writeV0Log(root, { ...fresh.header, createdAt: T0 + 99 }, edited.batches, { packChunks: false })
    expect(byId(await importV0({ from: root, persistence: p }), FRESH_CONTINUABLE).reason).toMatchObject({
      code: 'IMPORT_V0_CONFLICT',
      message: expect.stringMatching(/createdAt/),
    })
  })

  it('finds a changed delta inside a packed text row of the imported prefix, at its own seq', async () => {
    const { root, fixtures } = await v0Root()
    const p = persistence()
    await importV0({ from: root, persistence: p })
    const parent = fixtures.find((f) => f.header.id === PARENT)!
    const before = await p.inspect(SessionId(PARENT))
    // The harness log rewritten with one streamed piece of turn 2 changed (still packed into its row).
    const isDelta = (e: { data: unknown }) => {
      const data = e.data as { turn?: number; chunk?: { type?: string } }
      return data.turn === 2 && data.chunk?.type === 'text-delta'
    }
    const target = parent.builder.events.filter(isDelta)[1]!
    const batches = parent.builder.batches.map((batch) =>
      batch.map((e) =>
        e.seq === target.seq ? { ...e, data: { ...(e.data as object), chunk: { type: 'text-delta', index: 0, text: 'EDITED' } } } : e,
      ),
    )
    rmSync(parent.path!)
    await writeV0Log(root, parent.header, batches)
    expect(execFileSync('zstd', ['-dc', parent.path!]).toString()).toContain('"EDITED"')
    const report = await importV0({ from: root, persistence: p })
    expect(byId(report, PARENT)).toMatchObject({ status: 'failed', events: target.seq, reason: { code: 'IMPORT_V0_CONFLICT' } })
    expect(byId(report, PARENT).reason?.message).toContain(`Event ${target.seq} was imported earlier with other content`)
    expect((await p.inspect(SessionId(PARENT))).events).toEqual(before.events)
  })

  it('reports per-session faults with typed reasons and imports everything else, torn tails included', async () => {
    const { root, fixtures } = await v0Root()
    const mk = async (
      id: string,
      batches = new V0Builder().turn(1, 'q', 'an answer of some length').turn(2, 'q2', 'a second answer').batches,
    ) => writeV0Log(root, { id, createdAt: T0, cwd: '/srv/faults', delegationDepth: 0 }, batches, { packChunks: false })
    const torn = await mk('torn')
    // Cut into the last frame's block, not only its checksum: some of it is skipped (tornBytes).
    truncateSync(torn, statSync(torn).size - 12)
    const checksum = await mk('checksum')
    flipByte(checksum, -1)
    const foreign = await mk('foreign')
    writeFileSync(foreign, Buffer.from('\x1f\x8b\x08\x00 definitely not zstd'))
    const plain = new V0Builder().turn(1, 'q', 'answer')
    const badJson = v0LogPath(root, 'bad-json', '/srv/faults', 'none')
    await writeV0Log(root, { id: 'bad-json', createdAt: T0, cwd: '/srv/faults', delegationDepth: 0 }, plain.batches, {
      compression: 'none',
    })
    const lines = readFileSync(badJson, 'utf8').split('\n')
    lines[3] = '{"type":"step/start","seq":'
    writeFileSync(badJson, lines.join('\n'))
    const gap = new V0Builder().turn(1, 'q', 'answer')
    const gapEvents = gap.events.map((e, i) => (i >= 4 ? { ...e, seq: e.seq + 1 } : e))
    await writeV0Log(root, { id: 'gap', createdAt: T0, cwd: '/srv/faults', delegationDepth: 0 }, [gapEvents], { packChunks: false })
    const damaged = await mk('damaged')
    // Byte 6 of the second frame sits in its frame or first block header: the frame no longer decodes.
    const headerFrameBytes = v0LogBytes({ id: 'damaged', createdAt: T0, cwd: '/srv/faults', delegationDepth: 0 }, []).length
    flipByte(damaged, headerFrameBytes + 6, 0x06)
    const row = new V0Builder().turn(1, 'q', 'a long enough answer to pack')
    const badRow = await writeV0Log(root, { id: 'bad-row', createdAt: T0, cwd: '/srv/faults', delegationDepth: 0 }, row.batches, {
      compression: 'none',
    })
    writeFileSync(badRow, readFileSync(badRow, 'utf8').replace('"texts":[', '"texts":[7,'))
    // A log copied under another session's directory.
    const misplaced = v0LogPath(root, 'misplaced', '/srv/faults', 'zstd')
    await writeV0Log(root, { id: 'misplaced', createdAt: T0, cwd: '/srv/faults', delegationDepth: 0 }, [])
    writeFileSync(misplaced, readFileSync(checksum))
    // Two logs claiming one id (the second in another project directory).
    await mk('twin')
    await writeV0Log(root, { id: 'twin', createdAt: T0, cwd: '/srv/other', delegationDepth: 0 }, [], {})

    const p = persistence()
    const report = await importV0({ from: root, persistence: p })
    const reasons = Object.fromEntries(
      report.sessions
        .filter((s) => s.status === 'failed')
        .map((s) => [`${s.id}@${s.path.includes('other') ? 'other' : 'faults'}`, s.reason?.code]),
    )
    expect(reasons).toEqual({
      'checksum@faults': 'IMPORT_V0_CHECKSUM_MISMATCH',
      'foreign@faults': 'IMPORT_V0_FOREIGN_MAGIC',
      'bad-json@faults': 'IMPORT_V0_BAD_JSON',
      'gap@faults': 'IMPORT_V0_SEQ_GAP',
      'damaged@faults': 'IMPORT_V0_DAMAGED_FRAME',
      'bad-row@faults': 'IMPORT_V0_BAD_ROW',
      'misplaced@faults': 'IMPORT_V0_MISPLACED',
      'twin@faults': 'IMPORT_V0_DUPLICATE_ID',
      'twin@other': 'IMPORT_V0_DUPLICATE_ID',
    })
    expect(report).toMatchObject({ imported: fixtures.length + 1, failed: 9 })
    const tornResult = byId(report, 'torn')
    expect(tornResult.status).toBe('imported')
    expect(tornResult.tornBytes).toBeGreaterThan(0)
    expect(tornResult.events).toBeGreaterThan(0)
    expect((await p.inspect(SessionId('torn'))).events).toHaveLength(tornResult.events)
    for (const id of ['checksum', 'foreign', 'bad-json', 'gap', 'twin', 'damaged', 'bad-row', 'misplaced'])
      expect(await p.stat(SessionId(id))).toBeUndefined()
  })

  it('streams a session in batches, and takes back a new session whose log turns out bad after its first appends', async () => {
    const root = tempDir('late-fault')
    dirs.push(root)
    const header = { id: 'late', createdAt: T0, cwd: '/srv/late', delegationDepth: 0 }
    // More text than the reader parses at once (TEXT_SLICE), so batches are appended before the bad line is reached.
    const b = new V0Builder().turn(1, 'q', 'first answer').turn(2, 'q2', 'second answer')
    for (let i = 0; i < 6; i++) b.add('x/pad', { i, pad: 'z'.repeat(TEXT_SLICE / 4) })
    b.turn(3, 'q3', 'third answer')
    const path = await writeV0Log(root, header, b.batches, { compression: 'none', packChunks: false })
    const good = readFileSync(path, 'utf8')
    // The last line is bad JSON: the reader reaches it only after several 2-event batches were appended.
    const lines = good.split('\n')
    lines[lines.length - 2] = '{"type":"turn/end","seq":'
    writeFileSync(path, lines.join('\n'))
    const p = persistence()
    const report = await importV0({ from: root, persistence: p, batchEvents: 2 })
    expect(report.sessions[0]).toMatchObject({ id: 'late', status: 'failed', reason: { code: 'IMPORT_V0_BAD_JSON' } })
    expect(report.sessions[0]?.events).toBe(b.events.length - 1)
    expect(p.metrics.appends).toBeGreaterThan(2)
    expect(await p.stat(SessionId('late'))).toBeUndefined()

    // Repaired, it imports whole; then it grows by a bad suffix: the update appends nothing and keeps what was there.
    writeFileSync(path, good)
    expect(await importV0({ from: root, persistence: p, batchEvents: 2 })).toMatchObject({ imported: 1, failed: 0 })
    const before = await p.inspect(SessionId('late'))
    const appends = p.metrics.appends
    const more = new V0Builder(T0 + 5000)
    more.seed(b.events).turn(4, 'q4', 'fourth answer').turn(5, 'q5', 'fifth answer')
    const suffix = more.events.slice(b.events.length).map((e) => JSON.stringify(e))
    suffix[suffix.length - 1] = '{"type":"turn/end","seq":'
    writeFileSync(path, `${good}${suffix.join('\n')}\n`)
    const update = await importV0({ from: root, persistence: p, batchEvents: 2 })
    expect(update.sessions[0]).toMatchObject({ status: 'failed', reason: { code: 'IMPORT_V0_BAD_JSON' } })
    expect(p.metrics.appends).toBe(appends)
    expect((await p.inspect(SessionId('late'))).events).toEqual(before.events)
  })

  it('reports a line nested deeper than the stack as IMPORT_V0_BAD_JSON and takes back the batches before it', async () => {
    const root = tempDir('too-deep')
    dirs.push(root)
    const b = new V0Builder().turn(1, 'q', 'first answer').turn(2, 'q2', 'second answer')
    const path = await writeV0Log(root, { id: 'deep', createdAt: T0, cwd: '/srv/deep', delegationDepth: 0 }, b.batches, {
      compression: 'none',
      packChunks: false,
    })
    const depth = 200_000
    writeFileSync(
      path,
      `${readFileSync(path, 'utf8')}{"type":"x/deep","seq":${b.events.length},"time":${T0},"data":${'['.repeat(depth)}${']'.repeat(depth)}}\n`,
    )
    const p = persistence()
    const report = await importV0({ from: root, persistence: p, batchEvents: 2 })
    const reason = { code: 'IMPORT_V0_BAD_JSON', message: expect.stringContaining(`Line ${b.events.length + 2} `) }
    expect(report.sessions[0]).toMatchObject({ id: 'deep', status: 'failed', events: b.events.length, appended: 0, reason })
    expect(p.metrics.appends).toBeGreaterThan(2)
    expect(await p.stat(SessionId('deep'))).toBeUndefined()
    expect((await importV0({ from: root, dryRun: true })).sessions[0]).toMatchObject({ status: 'failed', reason })
  })

  it('takes back a new session whose late frame turns out damaged after its first appends (frames decode ahead on the pool)', async () => {
    const root = tempDir('late-frame')
    dirs.push(root)
    const b = new V0Builder()
    // Frames of a third of a pool group each: frame 8 is decoded only after batches of the frames before it were appended.
    for (let turn = 1; turn <= 9; turn++) {
      b.add('x/pad', { turn, pad: 'z'.repeat(Math.floor(POOL_GROUP_BYTES / 3)) })
      b.turn(turn, 'q', `answer ${turn}`)
    }
    const path = await writeV0Log(root, { id: 'late-frame', createdAt: T0, cwd: '/srv/late', delegationDepth: 0 }, b.batches)
    const good = readFileSync(path)
    const frame8 = scanFrames(good).spans[8]!
    flipByte(path, frame8.offset + frame8.size - 1, 0x01)
    const p = persistence()
    const report = await importV0({ from: root, persistence: p, batchEvents: 4 })
    expect(report.sessions[0]).toMatchObject({
      id: 'late-frame',
      status: 'failed',
      events: b.batches.slice(0, 7).flat().length,
      reason: { code: 'IMPORT_V0_CHECKSUM_MISMATCH' },
    })
    expect(p.metrics.appends).toBeGreaterThan(2)
    expect(await p.stat(SessionId('late-frame'))).toBeUndefined()
    writeFileSync(path, good)
    expect(await importV0({ from: root, persistence: p })).toMatchObject({ imported: 1, failed: 0 })
    expect((await p.inspect(SessionId('late-frame'))).events).toEqual(b.events.map(toDshEvent))
  })

  it('hands persistence deep-frozen events and refuses a -0 (it would come back as 0)', async () => {
    const root = tempDir('minus-zero')
    dirs.push(root)
    const path = v0LogPath(root, 'm', undefined, 'none')
    await writeV0Log(root, { id: 'm', createdAt: T0, delegationDepth: 0 }, [], { compression: 'none' })
    writeFileSync(
      path,
      `${readFileSync(path, 'utf8')}{"type":"turn/start","seq":0,"time":${T0},"data":{"turn":1}}\n{"type":"x/y","seq":1,"time":${T0},"data":{"v":-0}}\n`,
    )
    const p = persistence()
    const report = await importV0({ from: root, persistence: p })
    expect(report.sessions[0]).toMatchObject({
      id: 'm',
      status: 'failed',
      reason: { code: 'IMPORT_V0_BAD_JSON', message: expect.stringMatching(/Event 1 holds the number -0/) },
    })
    expect(await p.stat(SessionId('m'))).toBeUndefined()
    const event = toDshEvent({ type: 'turn/start', seq: 0, time: T0, data: { turn: 1 } })
    expect(Object.isFrozen(event) && Object.isFrozen(event.data)).toBe(true)
  })

  it('writes nothing in a dry run and stops with CANCELLED when aborted', async () => {
    const { root, fixtures } = await v0Root()
    const p = persistence()
    const dry = await importV0({ from: root, persistence: p, dryRun: true })
    expect(dry).toMatchObject({ dryRun: true, imported: fixtures.length, appends: 0 })
    expect(byId(dry, PARENT).appended).toBe(fixtures[0]!.builder.events.length)
    expect(await p.list()).toEqual([])
    expect(p.metrics.appends).toBe(0)
    const controller = new AbortController()
    controller.abort()
    await expect(importV0({ from: root, persistence: p, signal: controller.signal })).rejects.toMatchObject({ code: 'CANCELLED' })
    await expect(importV0({ from: join(root, 'missing'), persistence: p })).rejects.toMatchObject({ code: 'IMPORT_V0_ROOT_INVALID' })
  })

  it('copies a fork whose inherited prefix no longer matches its parent (no reference to a different prefix)', async () => {
    const { root, fixtures } = await v0Root()
    const fork = fixtures.find((f) => f.header.id === FORKED_CONTINUABLE)!
    const events = fork.builder.events.map((e) => (e.seq === 1 ? { ...e, data: { ...(e.data as object), id: 'edited' } } : e))
    rmSync(fork.path!)
    await writeV0Log(root, fork.header, [events], { packChunks: false })
    const p = persistence()
    const report = await importV0({ from: root, persistence: p })
    expect(byId(report, FORKED_CONTINUABLE)).toMatchObject({ status: 'imported' })
    expect(byId(report, FORKED_CONTINUABLE).forkSource).toBeUndefined()
    expect(byId(report, FORKED_ONE_SHOT).forkSource).toBe(PARENT)
    const stored = await p.inspect(SessionId(FORKED_CONTINUABLE))
    expect(stored.inheritedEventCount).toBe(fork.header.seedLength)
    expect(stored.events).toEqual(events.map(toDshEvent))
  })

  it('imports in append batches, the first batch of a fork holding its whole inherited prefix', async () => {
    const { root, fixtures } = await v0Root()
    const p = persistence()
    const report = await importV0({ from: root, persistence: p, batchEvents: 5 })
    expect(report.failed).toBe(0)
    const fork = byId(report, FORKED_ONE_SHOT)
    const parent = byId(report, PARENT)
    expect(report.appends).toBeGreaterThan(report.sessions.length)
    expect((await p.inspect(SessionId(FORKED_ONE_SHOT))).events).toHaveLength(fork.events)
    expect((await p.inspect(SessionId(PARENT))).events).toHaveLength(parent.events)
    expect(byId(report, CORRUPT_DESCRIPTOR).status).toBe('imported')

    // By source text: a 1-byte budget makes every batch one item — an event, or a text row of step 0 read as one run
    // of events — except a fork's first (its whole inherited prefix, as events).
    const q = persistence()
    const before = q.metrics.appends
    const single = await importV0({ from: root, persistence: q, batchBytes: 1 })
    const expected = single.sessions.reduce((n, s) => {
      const cut = fixtureCut(s.id)
      return n + (cut > 0 ? 1 : 0) + itemsFrom(fixtures.find((f) => f.header.id === s.id)!, cut)
    }, 0)
    expect(single.sessions.some((s) => itemsFrom(fixtures.find((f) => f.header.id === s.id)!, 0) < s.events)).toBe(true)
    expect(single.appends).toBe(expected)
    expect(q.metrics.appends - before).toBe(expected)
    await expect(importV0({ from: root, persistence: q, batchBytes: 0 })).rejects.toMatchObject({ code: 'IMPORT_V0_INVALID_OPTION' })
  })
})

describe('importV0 while an append is in flight', () => {
  it('lets the event loop run while it reads: an append completes and a cancel is seen within YIELD_EVERY events, not at the next batch', async () => {
    const root = tempDir('yield')
    dirs.push(root)
    const b = new V0Builder()
    for (let i = 0; i < 20 * YIELD_EVERY; i++) b.add('x/tick', { i })
    b.flush()
    await writeV0Log(root, { id: 'ticks', createdAt: T0, cwd: '/srv/ticks', delegationDepth: 0 }, b.batches, { packChunks: false })
    const p = createMemoryPersistence()
    const controller = new AbortController()
    const calls: number[] = []
    // Each append resolves a turn of the event loop later; once one has, the import is cancelled, again a turn later.
    const target = {
      stat: (id, signal) => p.stat(id, signal),
      inspect: (id, signal) => p.inspect(id, signal),
      delete: (id) => p.delete(id),
      append: async (t, events) => {
        calls.push(events.length)
        await new Promise((resolve) => setImmediate(resolve))
        const result = await p.append(t, events)
        setImmediate(() => controller.abort())
        return result
      },
    } as Pick<SessionPersistence, 'stat' | 'inspect' | 'delete' | 'append'> as SessionPersistence
    const batch = 8 * YIELD_EVERY
    await expect(
      importV0({ from: root, persistence: target, batchEvents: batch, batchBytes: 2 ** 30, signal: controller.signal }),
    ).rejects.toMatchObject({
      code: 'CANCELLED',
    })
    // Reading yields while the second batch fills, so the first append completes and the cancel is seen before that batch
    // is full; an import that yielded only at full batches would have started the second append (and the third).
    expect(calls).toEqual([batch])
    expect((await p.inspect(SessionId('ticks'))).events).toHaveLength(batch)
  })
})
