import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import {
  wireAgentDefinitionList,
  wireEventSearch,
  wireHistory,
  wireRecord,
  wireSessionList,
  wireSessionSearch,
  wireSubagentList,
  wireSubagentRow,
} from '../src/bodies.js'
import {
  agentDefinitionList,
  historyPage,
  searchPage,
  sessionListPage,
  sessionRecord,
  subagentList,
  subagentListRow,
} from '../src/index.js'

// The zod-free builders must produce, byte for byte, what the schemas' `parse`
// returns for the same service value: the declared fields only (a backend's
// extras dropped), in schema order, optional ones absent when undefined.

const extra = fc.record({ internalRowid: fc.nat(), indexedAt: fc.string() }, { requiredKeys: [] })

const header = fc
  .record(
    {
      version: fc.constant(1 as const),
      id: fc.string({ minLength: 1 }),
      createdAt: fc.nat({ max: Number.MAX_SAFE_INTEGER }),
      cwd: fc.option(fc.constantFrom('/work', '/tmp/x y'), { nil: undefined }),
      parentSession: fc.string({ minLength: 1 }),
      isSeeded: fc.boolean(),
      delegationDepth: fc.nat(),
      origin: fc.constant('subagent' as const),
      agentPreset: fc.string(),
    },
    { requiredKeys: ['version', 'id', 'createdAt', 'isSeeded', 'delegationDepth', 'parentSession'] },
  )
  .chain((h) => extra.map((x) => ({ ...x, ...h })))

const record = fc
  .record(
    {
      header,
      inheritedEventCount: fc.nat(),
      live: fc.boolean(),
      persisted: fc.boolean(),
      revision: fc.option(fc.string(), { nil: undefined }),
    },
    { requiredKeys: ['header', 'inheritedEventCount', 'live', 'persisted'] },
  )
  .chain((r) => extra.map((x) => ({ ...r, ...x })))

const event = fc
  .record({ type: fc.string({ minLength: 1 }), seq: fc.nat(), time: fc.nat(), data: fc.jsonValue() })
  .chain((e) => extra.map((x) => ({ ...x, ...e })))

const cursor = fc.option(fc.string(), { nil: undefined })
const listingValues = fc.option(
  fc.record({
    title: fc.option(fc.string({ minLength: 1 }), { nil: null }),
    tokens: fc.option(fc.nat(), { nil: null }),
    cost: fc.option(fc.double({ min: 0, max: 1e6, noNaN: true }), { nil: null }),
  }),
  { nil: undefined },
)

const catalogRow = fc.record(
  {
    row: fc.oneof(
      fc.record(
        {
          kind: fc.constant('child' as const),
          id: fc.string({ minLength: 1 }),
          activity: fc.constantFrom('running' as const, 'inactive' as const),
          hasChildren: fc.boolean(),
          mode: fc.constant('one-shot' as const),
          label: fc.string(),
        },
        { requiredKeys: ['kind', 'id', 'activity', 'hasChildren', 'mode'] },
      ),
      fc.record({
        kind: fc.constant('child' as const),
        id: fc.string({ minLength: 1 }),
        activity: fc.constantFrom('running' as const, 'inactive' as const),
        hasChildren: fc.boolean(),
        mode: fc.constant('continuable' as const),
        label: fc.string(),
      }),
      fc.record({
        kind: fc.constant('diagnostic' as const),
        id: fc.string({ minLength: 1 }),
        reason: fc.constantFrom('corrupt' as const, 'unsupported' as const, 'unavailable' as const),
      }),
    ),
    rung: fc.constantFrom(1 as const, 2 as const, 3 as const),
    parentId: fc.string({ minLength: 1 }),
    depth: fc.integer({ min: 1, max: 8 }),
    tokens: fc.option(fc.nat(), { nil: null }),
    durationMs: fc.option(fc.nat(), { nil: null }),
    startedAt: fc.option(fc.nat(), { nil: null }),
    endedAt: fc.option(fc.nat(), { nil: null }),
  },
  { requiredKeys: ['row', 'rung', 'parentId', 'depth'] },
)

/** A catalog row source as its wire row (the usage fields only when the source has them). */
type Usage = { tokens?: number | null; durationMs?: number | null; startedAt?: number | null; endedAt?: number | null }
const asWire = (r: { row: object; parentId: string; depth: number; rung: number } & Usage) => ({
  ...r.row,
  parentId: r.parentId,
  depth: r.depth,
  rung: r.rung,
  ...(r.tokens === undefined ? {} : { tokens: r.tokens }),
  ...(r.durationMs === undefined ? {} : { durationMs: r.durationMs }),
  ...(r.startedAt === undefined ? {} : { startedAt: r.startedAt }),
  ...(r.endedAt === undefined ? {} : { endedAt: r.endedAt }),
})

/** Equal as JSON text: the same fields in the same order, nothing `undefined` left to drop. */
const same = (built: unknown, parsed: unknown): void => {
  expect(JSON.stringify(built)).toBe(JSON.stringify(parsed))
  expect(Object.values(built as object)).not.toContain(undefined)
}

const scope = fc.constantFrom('root' as const, 'project' as const)
const positive = fc.integer({ min: 1, max: 1_000_000 })
const definition = fc
  .record(
    {
      name: fc.string({ minLength: 1 }),
      description: fc.string({ minLength: 1 }),
      provider: fc.string({ minLength: 1 }),
      model: fc.string({ minLength: 1 }),
      tools: fc.array(fc.string({ minLength: 1 }), { maxLength: 3 }),
      budgets: fc.record(
        { maxTokens: positive, maxCostUsd: fc.double({ min: 0.01, max: 100, noNaN: true }), maxWallMs: positive, maxTurns: positive },
        { requiredKeys: [] },
      ),
      file: fc.string({ minLength: 1 }),
      scope,
      overrides: fc.string({ minLength: 1 }),
      // What a listed definition carries beyond the wire row.
      instructions: fc.string(),
    },
    { requiredKeys: ['name', 'description', 'file', 'scope'] },
  )
  .chain((d) => extra.map((x) => ({ ...x, ...d })))

describe('@dsh/protocol/bodies builds what the schemas parse', () => {
  it('agent definition listings', () => {
    fc.assert(
      fc.property(
        fc.array(fc.record({ scope, dir: fc.string({ minLength: 1 }) }), { maxLength: 2 }),
        fc.array(definition, { maxLength: 4 }),
        (directories, definitions) => {
          const built = wireAgentDefinitionList(directories, definitions)
          same(built, agentDefinitionList.parse({ directories, definitions }))
          expect(JSON.stringify(built)).not.toContain('instructions')
        },
      ),
    )
  })

  it('listing records and pages', () => {
    fc.assert(
      fc.property(fc.array(fc.tuple(record, listingValues), { maxLength: 4 }), cursor, (pairs, nextCursor) => {
        const records = pairs.map(([r]) => r)
        const values = pairs.map(([, v]) => v)
        for (const r of records) same(wireRecord(r), sessionRecord.parse(r))
        // A record without values lists null for each, never a missing field.
        const sessions = pairs.map(([r, v]) => ({ ...r, ...(v ?? { title: null, tokens: null, cost: null }) }))
        same(wireSessionList({ records, nextCursor }, values), sessionListPage.parse({ sessions, nextCursor }))
      }),
    )
  })

  it('history pages', () => {
    fc.assert(
      fc.property(
        header,
        fc.nat(),
        fc.array(event, { maxLength: 4 }),
        fc.option(fc.nat(), { nil: undefined }),
        (h, cut, events, before) => {
          const page = { header: h, inheritedEventCount: cut, events, nextBefore: before, total: events.length + 3 }
          same(wireHistory(page), historyPage.parse(page))
        },
      ),
    )
  })

  it('catalog rows and lists, every arm', () => {
    fc.assert(
      fc.property(fc.array(catalogRow, { maxLength: 5 }), (rows) => {
        for (const r of rows) same(wireSubagentRow(r), subagentListRow.parse(asWire(r)))
        const wire = { parentId: 'p', scope: 'descendants' as const, rows: rows.map(asWire) }
        same(wireSubagentList('p', 'descendants', rows), subagentList.parse(wire))
      }),
    )
  })

  it('search pages of both kinds carry the kind discriminant', () => {
    const sessionHit = fc.record({ record, score: fc.double({ noNaN: true, noDefaultInfinity: true }), matches: fc.nat() })
    const eventHit = fc
      .record({
        id: fc.string({ minLength: 1 }),
        seq: fc.nat(),
        type: fc.string(),
        snippet: fc.string(),
        marks: fc.array(fc.tuple(fc.nat(), fc.nat()), { maxLength: 3 }),
        score: fc.double({ noNaN: true, noDefaultInfinity: true }),
      })
      .chain((h) => extra.map((x) => ({ ...x, ...h })))
    fc.assert(
      fc.property(fc.array(sessionHit, { maxLength: 3 }), fc.array(eventHit, { maxLength: 3 }), cursor, (sessions, events, nextCursor) => {
        same(wireSessionSearch({ hits: sessions, nextCursor }), searchPage.parse({ kind: 'sessions', hits: sessions, nextCursor }))
        same(wireEventSearch({ hits: events, nextCursor }), searchPage.parse({ kind: 'events', hits: events, nextCursor }))
      }),
    )
    expect(wireEventSearch({ hits: [] })).toEqual({ kind: 'events', hits: [] })
  })

  it('loads no zod at run time: type imports only, and the limits module, which itself imports nothing, so a CLI read command that prints a body loads no schema library', () => {
    const read = (name: string) => readFileSync(join(import.meta.dirname, '..', 'src', name), 'utf8')
    const importsOf = (source: string) => source.match(/^(?:import|export)\b[^;]*?\bfrom\s+'[^']+'/gm) ?? []
    const source = read('bodies.ts')
    const statements = importsOf(source)
    expect(statements.length).toBeGreaterThan(0)
    for (const statement of statements) expect(statement).toMatch(/^import type\b|from '\.\/limits\.js'$/)
    expect(importsOf(read('limits.ts'))).toEqual([])
    for (const text of [source, read('limits.ts')]) expect(text).not.toMatch(/\bimport\s*\(|\brequire\s*\(/)
  })
})
