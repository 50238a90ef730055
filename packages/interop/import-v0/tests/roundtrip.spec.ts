import { readFileSync, rmSync } from 'node:fs'
import { createMemoryPersistence, type SessionPersistence } from '@dsh/session-persistence'
import { createJsonlPersistence } from '@dsh/session-persistence-jsonl'
import { afterEach, describe, expect, it } from 'vitest'
import { decodeFrames, exportV0, headerLineText, importV0, listV0Logs, readV0Log, v0LogPath, writeV0Log } from '../src/index.js'
import { healthyFixtures, T0, tempDir, V0Builder, writeRoot } from './fixtures.js'

const dirs: string[] = []
const open: SessionPersistence[] = []
afterEach(async () => {
  for (const p of open.splice(0)) await p.close()
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true })
})
function dir(prefix: string): string {
  const d = tempDir(prefix)
  dirs.push(d)
  return d
}

const BACKENDS = {
  jsonl: (): SessionPersistence => createJsonlPersistence({ root: dir('dsh') }),
  memory: (): SessionPersistence => createMemoryPersistence(),
}

/** The decompressed JSONL lines of a v0 zstd log, frame boundaries ignored. */
function lines(path: string): string[] {
  const { frames } = decodeFrames(readFileSync(path))
  const text = Buffer.concat(frames).toString('utf8')
  return text.slice(0, -1).split('\n')
}

describe.each(Object.keys(BACKENDS) as (keyof typeof BACKENDS)[])('import → export through %s persistence', (name) => {
  it('gives back byte-for-byte equal JSONL lines for logs without packed rows, and the same events after expansion for the others', async () => {
    const fixtures = healthyFixtures()
    const from = await writeRoot(fixtures)
    dirs.push(from)
    const persistence = BACKENDS[name]()
    open.push(persistence)
    expect((await importV0({ from, persistence })).failed).toBe(0)
    const to = dir('export')
    const exported = await exportV0({ ids: fixtures.map((f) => f.header.id), persistence, to })
    expect(exported.sessions).toHaveLength(fixtures.length)
    let packed = 0
    for (const fixture of fixtures) {
      const original = readV0Log(from, (await listV0Logs(from)).find((e) => e.path === fixture.path)!)
      const path = v0LogPath(to, fixture.header.id, fixture.header.cwd, 'zstd')
      const back = await readV0Log(to, { path, compression: 'zstd', dirId: fixture.header.id })
      const source = await original
      expect(back.header).toEqual(source.header)
      expect(back.events).toEqual(source.events)
      if (source.packedRows === 0) expect(lines(path)).toEqual(lines(fixture.path!))
      else {
        packed += 1
        expect(lines(path)[0]).toBe(headerLineText(fixture.header))
        expect(lines(path).map((line) => JSON.parse(line))).toEqual([JSON.parse(headerLineText(fixture.header)), ...fixture.builder.events])
      }
    }
    expect(packed).toBeGreaterThan(0)
    // The export never overwrites, and the second import of an export is a no-op.
    await expect(exportV0({ ids: [fixtures[0]!.header.id], persistence, to })).rejects.toMatchObject({ code: 'IMPORT_V0_EXPORT_EXISTS' })
    await expect(exportV0({ ids: ['nobody'], persistence, to: dir('none') })).rejects.toMatchObject({ code: 'IMPORT_V0_NOT_FOUND' })
    const again = await importV0({ from: to, persistence })
    expect(again).toMatchObject({ unchanged: fixtures.length, appends: 0 })
  })

  it('exports sessions dsh wrote itself in the harness shapes', async () => {
    const persistence = BACKENDS[name]()
    open.push(persistence)
    const header = { version: 1 as const, id: 'native' as never, createdAt: T0, isSeeded: false, delegationDepth: 0 }
    const events = [
      { type: 'turn/start', data: { turn: 1 } },
      { type: 'user/message', data: { text: 'hello' } },
      { type: 'assistant/chunk', data: { turn: 1, index: 0, delta: 'hi' } },
      { type: 'assistant/message', data: { turn: 1, text: 'hi', usage: { input: 3, output: 1 } } },
      { type: 'tool/call', data: { turn: 1, callId: 'c', name: 'ls', arguments: { dir: '.' } } },
      { type: 'tool/result', data: { turn: 1, callId: 'c', content: 'a b', isError: false } },
      { type: 'turn/end', data: { turn: 1, reason: 'cancelled' } },
    ].map((e, seq) => ({ ...e, seq: seq as never, time: T0 + seq }))
    await persistence.append({ header, inheritedEventCount: 0 as never }, events)
    const to = dir('native')
    await exportV0({ ids: ['native'], persistence, to, compression: 'none' })
    const back = await readV0Log(to, { path: v0LogPath(to, 'native', undefined, 'none'), compression: 'none', dirId: 'native' })
    expect(back.events.map((e) => e.type)).toEqual(events.map((e) => e.type))
    expect(back.events[1]).toMatchObject({ data: { role: 'user', content: [{ type: 'text', text: 'hello' }] }, surfaceOp: 'append' })
    expect(back.events[2]?.data).toEqual({ turn: 1, step: 0, chunk: { type: 'text-delta', index: 0, text: 'hi' } })
    expect(back.events[4]?.data).toMatchObject({ arguments: '{"dir":"."}' })
    expect(back.events[5]?.data).toMatchObject({
      message: { content: [{ type: 'tool-result', toolCallId: 'c', content: [{ type: 'text', text: 'a b' }], isError: false }] },
    })
    expect(back.events[6]?.data).toEqual({ turn: 1, reason: { kind: 'aborted', reason: { kind: 'user' } } })
    // Re-importing the export maps the events back onto dsh's shapes.
    const other = createMemoryPersistence()
    await importV0({ from: to, persistence: other })
    const reimported = await other.inspect('native' as never)
    expect(reimported.events.map((e) => e.data)).toEqual(
      events.map((e) =>
        expect.objectContaining(Object.fromEntries(Object.entries(e.data).filter(([k]) => !(e.type === 'tool/result' && k === 'content')))),
      ),
    )
  })

  it('round-trips a plain (session.jsonl) root file for file', async () => {
    const persistence = BACKENDS[name]()
    open.push(persistence)
    const from = dir('plain')
    const b = new V0Builder().turn(1, 'plain text', 'an answer', { tool: true }).turn(2, 'more', 'and more', { requestHeader: false })
    const header = { id: 'plain/ü', createdAt: T0, cwd: '/srv/x', delegationDepth: 0 }
    const source = await writeV0Log(from, header, b.batches, { compression: 'none', packChunks: false })
    expect((await importV0({ from, persistence })).imported).toBe(1)
    const to = dir('plain-out')
    await exportV0({ ids: ['plain/ü'], persistence, to, compression: 'none' })
    expect(readFileSync(v0LogPath(to, 'plain/ü', '/srv/x', 'none'), 'utf8')).toBe(readFileSync(source, 'utf8'))
  })

  it('restores odd but valid shapes exactly: null blocks, non-JSON tool arguments, keys in another order', async () => {
    const persistence = BACKENDS[name]()
    open.push(persistence)
    const from = dir('odd')
    const b = new V0Builder()
    b.add('turn/start', { turn: 1 })
    b.add(
      'user/message',
      { content: [{ type: 'text', text: 'keys' }], source: { kind: 'user' }, role: 'user', id: 'u' },
      { surfaceOp: 'append' },
    )
    b.add('assistant/message', {
      turn: 1,
      step: 2,
      message: {
        id: 'a',
        role: 'assistant',
        content: [null, { type: 'text', text: 'after a null' }],
        source: { kind: 'model', provider: 'p', model: 'm' },
      },
    })
    b.add('tool/call', { turn: 1, step: 2, callId: 'c', name: 'n', arguments: '{"a": 1}' })
    b.add('tool/call', { turn: 1, step: 2, callId: 'd', name: 'n', arguments: 'not json' })
    b.add('assistant/chunk', { turn: 1, step: 2, chunk: { type: 'text-delta', index: 0, text: 'step 2' } })
    b.add('turn/end', { reason: { kind: 'max-tokens' }, turn: 1 })
    b.flush()
    await writeRoot([{ header: { id: 'odd', createdAt: T0, delegationDepth: 0 }, builder: b, packChunks: false }], from)
    await importV0({ from, persistence })
    const stored = await persistence.inspect('odd' as never)
    expect(stored.events.map((e) => e.type)).toEqual([
      'turn/start',
      'user/message',
      'assistant/message',
      'tool/call',
      'tool/call',
      'assistant/chunk',
      'turn/end',
    ])
    expect(stored.events[3]?.data).toMatchObject({ arguments: '{"a": 1}', v0: { rawArguments: true } })
    expect(stored.events[6]?.data).toMatchObject({ reason: 'completed' })
    const to = dir('odd-out')
    await exportV0({ ids: ['odd'], persistence, to, compression: 'none' })
    const written = readFileSync(v0LogPath(to, 'odd', undefined, 'none'), 'utf8')
      .split('\n')
      .slice(1, -1)
    expect(written).toEqual(b.events.map((e) => JSON.stringify(e)))
  })

  it('writes a grown session as one frame per turn', async () => {
    const persistence = BACKENDS[name]()
    open.push(persistence)
    const from = dir('turns')
    const b = new V0Builder().turn(1, 'a', 'b', { requestHeader: false }).turn(2, 'c', 'd', { requestHeader: false })
    await writeRoot([{ header: { id: 's', createdAt: T0, delegationDepth: 0 }, builder: b, packChunks: false }], from)
    await importV0({ from, persistence })
    const to = dir('turns-out')
    await exportV0({ ids: ['s'], persistence, to })
    const { frames } = decodeFrames(readFileSync(v0LogPath(to, 's', undefined, 'zstd')))
    expect(frames).toHaveLength(3)
  })
})
