import { rmSync } from 'node:fs'
import { Context } from '@dsh/context'
import { type Session, SessionId, sessionStorePlugin } from '@dsh/session'
import { createMemoryPersistence, type SessionPersistence, sessionPersistencePlugin } from '@dsh/session-persistence'
import { createJsonlPersistence } from '@dsh/session-persistence-jsonl'
import { createPostgresPersistence } from '@dsh/session-persistence-postgres'
import { startTestCluster, type TestCluster } from '@dsh/session-persistence-postgres/testing'
import { sessionProjectionsPlugin } from '@dsh/session-projection'
import { createSessionQuery } from '@dsh/session-query'
import { createScriptedDriver, type SubagentSettings, subagentsPlugin } from '@dsh/subagent'
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import { z } from 'zod'
import { exportV0, importV0, listV0Logs, readV0Log, type V0Header } from '../src/index.js'
import { CWD, PARENT, T0, tempDir, V0Builder, writeRoot } from './fixtures.js'

/**
 * dsh sessions exported to the harness's v0 format and imported back: every
 * exported descriptor is one the harness's parser accepts, every line of a
 * type it does not know is marked ignorable (its loader skips those and
 * refuses any other unknown type), and the re-import lists the same catalog
 * with the same descriptors and the same options outside them.
 */

/**
 * The harness's acceptance of a persisted descriptor, written from its
 * published parser: version the number 2; one-shot keys version, mode,
 * provider, label? only; continuable adds agentProvider?, agentModel?,
 * persona?, toolFilter? ({ allow?, deny? } string arrays, at least one);
 * every field a string of any length; a continuable label required.
 */
const toolFilter = z
  .object({ allow: z.array(z.string()).optional(), deny: z.array(z.string()).optional() })
  .strict()
  .refine((value) => value.allow !== undefined || value.deny !== undefined)
const harnessDescriptor = z.union([
  z.object({ version: z.literal(2), mode: z.literal('one-shot'), provider: z.string(), label: z.string().optional() }).strict(),
  z
    .object({
      version: z.literal(2),
      mode: z.literal('continuable'),
      provider: z.string(),
      label: z.string(),
      agentProvider: z.string().optional(),
      agentModel: z.string().optional(),
      persona: z.string().optional(),
      toolFilter: toolFilter.optional(),
    })
    .strict(),
])

/** The event types the harness's loader knows among those a dsh export writes; any other type must be marked ignorable. */
const HARNESS_KNOWN = new Set([
  'turn/start',
  'turn/end',
  'user/message',
  'assistant/chunk',
  'assistant/message',
  'tool/call',
  'tool/result',
  'subagent/descriptor',
])

let cluster: TestCluster | undefined
const dirs: string[] = []
const contexts: Context[] = []
const stores: SessionPersistence[] = []

beforeAll(async () => {
  cluster = await startTestCluster({ settings: { fsync: 'off' } })
})
afterAll(async () => {
  await cluster?.stop()
})
afterEach(async () => {
  for (const ctx of contexts.splice(0)) await ctx.dispose()
  for (const store of stores.splice(0)) await store.close().catch(() => {})
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true })
})

function dir(prefix: string): string {
  const d = tempDir(prefix)
  dirs.push(d)
  return d
}

const BACKENDS = {
  memory: async (): Promise<SessionPersistence> => createMemoryPersistence(),
  jsonl: async (): Promise<SessionPersistence> => createJsonlPersistence({ root: dir('dsh') }),
  postgres: async (): Promise<SessionPersistence> => createPostgresPersistence({ connectionString: await cluster!.createDatabase() }),
}

/** A process over `persistence`: the store, projections, query and subagent runtime (scripted: no model). */
async function host(persistence: SessionPersistence) {
  const ctx = new Context()
  contexts.push(ctx)
  await ctx.activate(sessionStorePlugin())
  await ctx.activate(sessionProjectionsPlugin())
  await ctx.activate(sessionPersistencePlugin(persistence, { writeBehindMs: 0 }))
  ctx.provide('sessionQuery', createSessionQuery({ sessions: ctx.require('sessions'), persistence }))
  await ctx.activate(subagentsPlugin({ driver: createScriptedDriver() }))
  return { ctx, sessions: ctx.require('sessions'), runtime: ctx.require('subagents') }
}

const every: SubagentSettings = {
  agentProvider: 'deepseek',
  agentModel: 'deepseek-chat',
  persona: 'You check facts.',
  toolFilter: { allow: ['read_file', 'grep'], deny: ['bash'] },
  outputSchema: { type: 'object', properties: { ok: { type: 'boolean' } }, required: ['ok'] },
  model: 'dsh-model',
  instructions: 'Answer in JSON.',
  maxTurns: 3,
}

function turn(session: Session, n: number, text: string): void {
  session.append('turn/start', { turn: n })
  session.append('user/message', { text: `prompt ${n}` })
  session.append('assistant/message', { turn: n, text })
  session.append('turn/end', { turn: n, reason: 'completed' })
}

/**
 * What the demo builds, in one process: a parent with fresh and forked,
 * one-shot and continuable children (one resumed), a grandchild, a child
 * whose turn a crash left open, a child without a descriptor (listed
 * corrupt), and a delegation that uses every descriptor option and every
 * setting kept outside the descriptor. Returns every session id.
 */
async function buildRoot(persistence: SessionPersistence): Promise<{ parent: string; ids: string[] }> {
  const { sessions, runtime } = await host(persistence)
  const parent = sessions.create({ id: 'release-1.4', cwd: '/work/release' })
  turn(parent, 1, 'Plan: build, test, ship.')
  const run = (handle: { done: Promise<unknown> }) => handle.done
  await run(runtime.spawn(parent, { mode: 'one-shot', label: 'changelog', context: 'fresh', prompt: 'write it', id: 'changelog' }))
  await run(runtime.spawn(parent, { mode: 'one-shot', context: 'fork', prompt: 'summarize', id: 'summary' }))
  const reviewer = runtime.spawn(parent, { mode: 'continuable', label: 'reviewer', context: 'fork', prompt: 'review', id: 'reviewer' })
  await run(reviewer)
  await run(await runtime.resume('reviewer', { caller: parent, prompt: 'and the tests?' }))
  const restored = sessions.restore(await persistence.load(SessionId('reviewer')))
  await run(runtime.spawn(restored, { mode: 'one-shot', label: 'test runner', context: 'fresh', id: 'test-runner' }))
  await sessions.dispose('reviewer')
  await run(
    runtime.spawn(parent, { mode: 'one-shot', label: 'facts', context: 'fresh', settings: every, id: 'facts', prompt: '{"ok":true}' }),
  )
  await run(runtime.spawn(parent, { mode: 'continuable', label: 'auditor', context: 'fork', settings: every, id: 'auditor' }))
  // A child whose process died mid-turn: its turn stays open in the log.
  const crashed = sessions.create({ id: 'crashed', origin: 'subagent', parentSession: parent.id, delegationDepth: 1, cwd: '/work/release' })
  crashed.append('subagent/descriptor', { version: 2, mode: 'continuable', provider: 'scripted', label: 'migrator' })
  crashed.append('turn/start', { turn: 1 })
  crashed.append('assistant/chunk', { turn: 1, index: 0, delta: 'migrating' })
  await sessions.dispose('crashed')
  const bare = sessions.create({ id: 'no-descriptor', origin: 'subagent', parentSession: parent.id, delegationDepth: 1 })
  turn(bare, 1, 'I never said who I am.')
  await sessions.dispose('no-descriptor')
  await sessions.flush(parent)
  const ids = (await persistence.list()).map((record) => record.header.id as string)
  return { parent: parent.id, ids }
}

/** Per session: its own descriptor and options events' data (the own suffix only), in log order. */
async function recordsOf(persistence: SessionPersistence, ids: readonly string[]) {
  const out: Record<string, { descriptor: unknown[]; options: unknown[] }> = {}
  for (const id of ids) {
    const observation = await persistence.inspect(SessionId(id))
    const own = observation.events.slice(observation.inheritedEventCount)
    out[id] = {
      descriptor: own.filter((e) => e.type === 'subagent/descriptor').map((e) => e.data),
      options: own.filter((e) => e.type === 'subagent/options').map((e) => e.data),
    }
  }
  return out
}

describe.each(Object.keys(BACKENDS) as (keyof typeof BACKENDS)[])('dsh → v0 → dsh (%s persistence)', (name) => {
  it('exports only harness-valid descriptors, marks what the harness does not know, and re-imports the same catalog, descriptors and options', async () => {
    const source = await BACKENDS[name]()
    stores.push(source)
    const { parent, ids } = await buildRoot(source)
    expect(ids.length).toBe(9)
    const before = await (await host(source)).runtime.explainDescendants(parent)
    expect(before.map((e) => [e.row.id, e.row.kind === 'child' ? `${e.row.mode}:${e.row.label ?? '-'}` : e.row.reason])).toEqual([
      ['changelog', 'one-shot:changelog'],
      ['summary', 'one-shot:-'],
      ['reviewer', 'continuable:reviewer'],
      ['test-runner', 'one-shot:test runner'],
      ['facts', 'one-shot:facts'],
      ['auditor', 'continuable:auditor'],
      ['crashed', 'continuable:migrator'],
      ['no-descriptor', 'corrupt'],
    ])

    const to = dir('v0')
    await exportV0({ ids, persistence: source, to })
    let descriptors = 0
    for (const entry of await listV0Logs(to)) {
      const log = await readV0Log(to, entry)
      for (const event of log.events) {
        if (event.type === 'subagent/descriptor') {
          descriptors++
          expect(harnessDescriptor.safeParse(event.data).success, JSON.stringify(event.data)).toBe(true)
        }
        if (!HARNESS_KNOWN.has(event.type)) expect(event, event.type).toMatchObject({ ignorable: true })
      }
    }
    // Seeded children carry their parent's prefix, but no parent here is a subagent: one descriptor per child.
    expect(descriptors).toBe(7)

    const target = await BACKENDS[name]()
    stores.push(target)
    const report = await importV0({ from: to, persistence: target })
    expect(report.failed).toBe(0)
    expect(report.imported).toBe(ids.length)
    const after = await (await host(target)).runtime.explainDescendants(parent)
    expect(after.map((e) => e.row)).toEqual(before.map((e) => e.row))
    expect(after.map((e) => [e.parentId, e.depth])).toEqual(before.map((e) => [e.parentId, e.depth]))
    const records = await recordsOf(source, ids)
    expect(await recordsOf(target, ids)).toEqual(records)
    // The options a spawn keeps outside the descriptor are there, whole.
    expect(records.facts).toEqual({
      descriptor: [{ version: 2, mode: 'one-shot', provider: 'scripted', label: 'facts' }],
      options: [{ version: 1, ...every }],
    })
    const { agentProvider, agentModel, persona, toolFilter: filter, ...dshOnly } = every
    expect(records.auditor).toEqual({
      descriptor: [
        { version: 2, mode: 'continuable', provider: 'scripted', label: 'auditor', agentProvider, agentModel, persona, toolFilter: filter },
      ],
      options: [{ version: 1, ...dshOnly }],
    })
  })

  it('accepts every descriptor the harness accepts: any string as label or provider, the empty one too, written inside the first turn', async () => {
    const child = (id: string, createdAt: number): V0Header => ({
      id,
      createdAt,
      cwd: CWD,
      parentSession: PARENT,
      origin: 'subagent',
      delegationDepth: 1,
    })
    const parent = new V0Builder().turn(1, 'Plan.', 'Planned.')
    const fixtures = [
      { header: { id: PARENT, createdAt: T0, cwd: CWD, delegationDepth: 0 }, builder: parent, packChunks: false },
      {
        header: child('one-shot-empty-label', T0 + 1),
        builder: new V0Builder(T0 + 1).childTurn(1, { version: 2, mode: 'one-shot', provider: 'spawn', label: '' }, 'Ok.'),
        packChunks: false,
      },
      {
        header: child('continuable-empty', T0 + 2),
        builder: new V0Builder(T0 + 2).childTurn(
          1,
          { version: 2, mode: 'continuable', provider: '', label: '', agentProvider: '', toolFilter: { allow: [] } },
          'Ok.',
        ),
        packChunks: false,
      },
      {
        header: child('one-shot-persona', T0 + 3),
        builder: new V0Builder(T0 + 3).childTurn(1, { version: 2, mode: 'one-shot', provider: 'spawn', persona: 'x' }, 'Ok.'),
        packChunks: false,
      },
    ]
    const from = await writeRoot(fixtures, dir('harness'))
    const persistence = await BACKENDS[name]()
    stores.push(persistence)
    expect((await importV0({ from, persistence })).failed).toBe(0)
    const { runtime } = await host(persistence)
    expect(await runtime.listChildren(PARENT)).toEqual([
      { kind: 'child', id: 'one-shot-empty-label', activity: 'inactive', hasChildren: false, mode: 'one-shot', label: '' },
      { kind: 'child', id: 'continuable-empty', activity: 'inactive', hasChildren: false, mode: 'continuable', label: '' },
      // A one-shot descriptor with a continuable's field is corrupt to the harness, and so here.
      { kind: 'diagnostic', id: 'one-shot-persona', reason: 'corrupt' },
    ])
  })
})
