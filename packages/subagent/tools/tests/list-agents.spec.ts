import { type Context, isDshError } from '@dsh/context'
import type { Session } from '@dsh/session'
import { createScriptedDriver, type ScriptStep, SubagentRuntime, subagentsPlugin } from '@dsh/subagent'
import { afterEach, describe, expect, it } from 'vitest'
import {
  createListAgentsTool,
  type ListAgentsTableResult,
  type ListAgentsTool,
  listAgentsDescription,
  listAgentsJsonSchema,
  listAgentsTableDescription,
  renderListAgents,
  renderListAgentsEntries,
  toListAgentsRow,
} from '../src/index.js'
import { storeContext } from './support.js'

let ctx: Context | undefined
afterEach(async () => {
  await ctx?.dispose()
  ctx = undefined
})

/** A real host: store, projections, memory persistence, memory query, subagents with a scripted driver. */
async function host(): Promise<{ ctx: Context; tool: ListAgentsTool<ListAgentsTableResult>; parent: Session }> {
  ctx = await storeContext()
  // The 'watcher' child holds its turn open until the context is disposed (which interrupts it).
  const held = new Promise<never>(() => {})
  const script = (label: string | undefined): ScriptStep[] =>
    label === 'watcher' ? [{ kind: 'until', promise: held }] : [{ kind: 'message', text: 'done' }]
  await ctx.activate(subagentsPlugin({ driver: createScriptedDriver((run) => script(run.identity?.label)) }))
  const tool = createListAgentsTool(ctx.require('subagents'), { format: 'table' })
  const parent = ctx.require('sessions').create({ id: 'parent' })
  return { ctx, tool, parent }
}

async function family(c: Context, parent: Session): Promise<void> {
  const runtime = c.require('subagents')
  const sessions = c.require('sessions')
  await runtime.spawn(parent, { mode: 'one-shot', label: 'scan the repo', context: 'fresh', id: 'child-a' }).done
  await runtime.spawn(parent, { mode: 'continuable', label: 'reviewer', context: 'fork', id: 'child-b' }).done
  runtime.spawn(parent, { mode: 'continuable', label: 'watcher', context: 'fresh', id: 'child-c' })
  await runtime.spawn(parent, { mode: 'one-shot', context: 'fresh', id: 'child-d' }).done
  // A settled child whose descriptor is damaged.
  const broken = sessions.create({ id: 'child-e', origin: 'subagent', parentSession: parent.id, delegationDepth: 1 })
  broken.append('subagent/descriptor', { version: 7, mode: 'one-shot', provider: 'scripted' })
  await sessions.dispose(broken.id)
  // A grandchild under the reviewer.
  const reviewer = sessions.restore(await c.require('sessionPersistence').load('child-b' as never))
  await runtime.spawn(reviewer, { mode: 'one-shot', label: 'nested', context: 'fresh', id: 'grandchild' }).done
  await sessions.dispose(reviewer.id)
}

describe('list_agents, table format', () => {
  it('pins its name, description and JSON Schema', () => {
    expect(listAgentsJsonSchema).toEqual({
      $schema: 'https://json-schema.org/draft/2020-12/schema',
      type: 'object',
      properties: {
        scope: {
          description: "'children' (default): your direct subagents. 'descendants': your whole subagent tree, depth-first.",
          type: 'string',
          enum: ['children', 'descendants'],
        },
      },
      additionalProperties: false,
    })
    for (const description of [listAgentsDescription, listAgentsTableDescription]) {
      expect(description).toContain("'running'")
      expect(description).toContain("'idle'")
      expect(description).toContain("'ready'")
    }
    expect(renderListAgentsEntries([], 'children')).toBe('(no subagents)')
  })

  it('says (no subagents) when there are none', async () => {
    const { tool, parent } = await host()
    expect(tool.name).toBe('list_agents')
    expect(await tool.execute({}, { agent: parent })).toEqual({ text: '(no subagents)', rows: [] })
    expect(await tool.execute(undefined, { agent: parent })).toEqual({ text: '(no subagents)', rows: [] })
  })

  it('renders one line per child or diagnostic, with running / idle / ready statuses', async () => {
    const { ctx: c, tool, parent } = await host()
    await family(c, parent)
    const result = await tool.execute({ scope: 'children' }, { agent: parent })
    expect(result.text).toBe(
      [
        'child-a  ready  one-shot  "scan the repo"',
        'child-b  idle  continuable  "reviewer"  +subagents',
        'child-c  running  continuable  "watcher"',
        'child-d  ready  one-shot  (no label)',
        'child-e  diagnostic: corrupt (its record is damaged; it cannot be resumed)',
      ].join('\n'),
    )
    expect(result.rows).toEqual([
      {
        kind: 'child',
        id: 'child-a',
        status: 'ready',
        mode: 'one-shot',
        label: 'scan the repo',
        hasChildren: false,
        parentId: 'parent',
        depth: 1,
      },
      {
        kind: 'child',
        id: 'child-b',
        status: 'idle',
        mode: 'continuable',
        label: 'reviewer',
        hasChildren: true,
        parentId: 'parent',
        depth: 1,
      },
      {
        kind: 'child',
        id: 'child-c',
        status: 'running',
        mode: 'continuable',
        label: 'watcher',
        hasChildren: false,
        parentId: 'parent',
        depth: 1,
      },
      { kind: 'child', id: 'child-d', status: 'ready', mode: 'one-shot', hasChildren: false, parentId: 'parent', depth: 1 },
      { kind: 'diagnostic', id: 'child-e', reason: 'corrupt', parentId: 'parent', depth: 1 },
    ])
  })

  it('indents descendants under their parents', async () => {
    const { ctx: c, tool, parent } = await host()
    await family(c, parent)
    const result = await tool.execute({ scope: 'descendants' }, { agent: parent })
    expect(result.text.split('\n').slice(1, 3)).toEqual([
      'child-b  idle  continuable  "reviewer"  +subagents',
      '  grandchild  ready  one-shot  "nested"',
    ])
    expect(result.rows.find((r) => r.id === 'grandchild')).toMatchObject({ parentId: 'child-b', depth: 2 })
  })

  it('renders the unavailable and unsupported reasons too', () => {
    expect(renderListAgents([{ kind: 'diagnostic', id: 'x' as never, reason: 'unavailable', parentId: 'p' as never, depth: 1 }])).toBe(
      'x  diagnostic: unavailable (could not be read just now; list again to retry)',
    )
    expect(renderListAgents([{ kind: 'diagnostic', id: 'y' as never, reason: 'unsupported', parentId: 'p' as never, depth: 3 }])).toBe(
      '    y  diagnostic: unsupported (written by a newer version)',
    )
  })

  it('shows tokens and duration only for rows made with usage, and leaves an unknown one blank', () => {
    const child = { kind: 'child', id: 'c' as never, activity: 'inactive', hasChildren: true, mode: 'one-shot', label: 'scan' } as const
    const entry = {
      row: child,
      rung: 2,
      parentId: 'p' as never,
      depth: 1,
      tokens: 1234,
      durationMs: 2500,
      startedAt: 1000,
      endedAt: 4000,
    } as const
    expect(renderListAgents([toListAgentsRow(entry)])).toBe('c  ready  one-shot  "scan"  +subagents')
    expect(toListAgentsRow(entry, 0, true)).toMatchObject({ tokens: 1234, durationMs: 2500 })
    expect(renderListAgents([toListAgentsRow(entry, 0, true)])).toBe('c  ready  one-shot  "scan"  1234 tokens  2.5s  +subagents')
    expect(renderListAgents([toListAgentsRow({ ...entry, tokens: null }, 0, true)])).toBe('c  ready  one-shot  "scan"  2.5s  +subagents')
    expect(renderListAgents([toListAgentsRow({ ...entry, tokens: null, durationMs: null }, 0, true)])).toBe(
      'c  ready  one-shot  "scan"  +subagents',
    )
  })

  it.each([
    ['a wrong type', { scope: 5 }, 'scope'],
    ['an unknown scope', { scope: 'everyone' }, 'scope'],
    ['an extra key', { scope: 'children', verbose: true }, 'Unrecognized key: "verbose"'],
    ['a string', 'children', 'expected object'],
    ['an array', [], 'expected object'],
  ])('rejects %s with a typed, readable error', async (_name, input, fragment) => {
    const { tool, parent } = await host()
    const error = await tool.execute(input, { agent: parent }).then(
      () => undefined,
      (e: unknown) => e,
    )
    expect(isDshError(error, 'TOOL_SUBAGENT_CONTROL_INVALID_INPUT')).toBe(true)
    expect((error as Error).message).toContain(fragment)
    expect((error as Error).message).toContain('Expected {} or { "scope": "children" | "descendants" }')
  })

  it('needs the calling agent', async () => {
    const { tool } = await host()
    await expect(tool.execute({}, { agent: { id: '' } })).rejects.toMatchObject({ code: 'TOOL_SUBAGENT_CONTROL_INVALID_CONTEXT' })
  })

  it('passes catalog failures through with their codes (missing query corpus, cancellation)', async () => {
    const { ctx: c, tool, parent } = await host()
    // A runtime over a service source without the query corpus (the plugin itself refuses to activate without one).
    const noQuery = new SubagentRuntime(
      { get: ((name: string) => (name === 'sessionQuery' ? undefined : c.get(name as never))) as never },
      { driver: createScriptedDriver() },
    )
    await expect(createListAgentsTool(noQuery, { format: 'table' }).execute({}, { agent: parent })).rejects.toMatchObject({
      code: 'SUBAGENT_CONTROL_QUERY_UNAVAILABLE',
    })
    await expect(tool.execute({}, { agent: parent, signal: AbortSignal.abort() })).rejects.toMatchObject({ code: 'CANCELLED' })
  })
})
