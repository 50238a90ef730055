import { type Context, isDshError } from '@dsh/context'
import type { Session } from '@dsh/session'
import { createScriptedDriver, type ScriptStep, type SubagentRun, type SubagentRuntime, subagentsPlugin } from '@dsh/subagent'
import { afterEach, describe, expect, it } from 'vitest'
import {
  createCloseAgentTool,
  createInterruptAgentTool,
  createListAgentsTool,
  createReportTool,
  createSendMessageTool,
  createSubagentTool,
  createWaitAgentsTool,
  renderWaitAgents,
  SUBAGENT_CONTROL_TOOL_NAMES,
  type SubagentControlTool,
  subagentControlTools,
} from '../src/index.js'
import { codeOf, type Gate, gate, storeContext } from './support.js'

let ctx: Context | undefined
afterEach(async () => {
  await ctx?.dispose()
  ctx = undefined
})

/**
 * A real host (store, projections, memory persistence and query, subagents
 * with the control tools). Children labelled `held…` hold their turn until
 * `held.open()`; a one-shot's final message is its prompt when it starts with
 * `{`, else `done: <prompt>`.
 */
async function host(): Promise<{
  runtime: SubagentRuntime
  parent: Session
  stranger: Session
  held: Gate
  tool(name: string): SubagentControlTool
}> {
  ctx = await storeContext()
  const held = gate()
  const script = (run: SubagentRun): ScriptStep[] => {
    if (run.identity?.label?.startsWith('held') === true && run.kind === 'spawn')
      return [
        { kind: 'until', promise: held.promise },
        { kind: 'message', text: 'held done' },
      ]
    if (run.identity?.label === 'reporter')
      return [
        { kind: 'call', name: 'report', arguments: { message: 'found it' } },
        { kind: 'message', text: 'reported' },
      ]
    const prompt = run.prompt ?? ''
    return [{ kind: 'message', text: prompt.startsWith('{') ? prompt : `done: ${prompt}` }]
  }
  await ctx.activate(subagentsPlugin({ driver: createScriptedDriver(script), tools: (_agent, runtime) => subagentControlTools(runtime) }))
  const runtime = ctx.require('subagents')
  const tools = subagentControlTools(runtime)
  const sessions = ctx.require('sessions')
  return {
    runtime,
    parent: sessions.create({ id: 'parent' }),
    stranger: sessions.create({ id: 'stranger' }),
    held,
    tool: (name) => tools.find((t) => t.name === name)!,
  }
}

describe('subagentControlTools', () => {
  it('returns all seven tools, or the ones a filter keeps', async () => {
    const { runtime } = await host()
    expect(subagentControlTools(runtime).map((t) => t.name)).toEqual([...SUBAGENT_CONTROL_TOOL_NAMES])
    expect(SUBAGENT_CONTROL_TOOL_NAMES).toEqual([
      'subagent',
      'send_message',
      'wait_agents',
      'interrupt_agent',
      'close_agent',
      'report',
      'list_agents',
    ])
    expect(subagentControlTools(runtime, { filter: ['report'] }).map((t) => t.name)).toEqual(['report'])
    expect(subagentControlTools(runtime, { filter: (name) => name !== 'report' }).map((t) => t.name)).not.toContain('report')
    for (const tool of subagentControlTools(runtime)) {
      expect(tool.description.length).toBeGreaterThan(60)
      expect(tool.jsonSchema).toMatchObject({
        $schema: 'https://json-schema.org/draft/2020-12/schema',
        type: 'object',
        additionalProperties: false,
      })
    }
  })

  it('pins every JSON Schema', () => {
    const control = {} as never
    const schemas = Object.fromEntries(
      [
        createSubagentTool,
        createSendMessageTool,
        createWaitAgentsTool,
        createInterruptAgentTool,
        createCloseAgentTool,
        createReportTool,
      ].map((make) => {
        const tool = make(control)
        return [tool.name, tool.jsonSchema]
      }),
    )
    expect(schemas).toMatchInlineSnapshot(`
      {
        "close_agent": {
          "$schema": "https://json-schema.org/draft/2020-12/schema",
          "additionalProperties": false,
          "properties": {
            "id": {
              "description": "The id of a continuable subagent you no longer need.",
              "maxLength": 1024,
              "minLength": 1,
              "type": "string",
            },
          },
          "required": [
            "id",
          ],
          "type": "object",
        },
        "interrupt_agent": {
          "$schema": "https://json-schema.org/draft/2020-12/schema",
          "additionalProperties": false,
          "properties": {
            "id": {
              "description": "The id of a subagent of yours (or of one of your subagents).",
              "maxLength": 1024,
              "minLength": 1,
              "type": "string",
            },
          },
          "required": [
            "id",
          ],
          "type": "object",
        },
        "report": {
          "$schema": "https://json-schema.org/draft/2020-12/schema",
          "additionalProperties": false,
          "properties": {
            "message": {
              "description": "What your parent should know now: progress, a finding, a question.",
              "maxLength": 20000,
              "minLength": 1,
              "type": "string",
            },
          },
          "required": [
            "message",
          ],
          "type": "object",
        },
        "send_message": {
          "$schema": "https://json-schema.org/draft/2020-12/schema",
          "additionalProperties": false,
          "properties": {
            "id": {
              "description": "The id of one of your continuable subagents (from subagent or list_agents).",
              "maxLength": 1024,
              "minLength": 1,
              "type": "string",
            },
            "message": {
              "description": "What to tell it: new work, an answer, a correction.",
              "maxLength": 1048576,
              "minLength": 1,
              "type": "string",
            },
          },
          "required": [
            "id",
            "message",
          ],
          "type": "object",
        },
        "subagent": {
          "$schema": "https://json-schema.org/draft/2020-12/schema",
          "additionalProperties": false,
          "properties": {
            "agent": {
              "description": "The name of a defined agent to start: its instructions, model, tools and budgets apply. Inline instructions are added to its own; inline tools may only narrow its tools.",
              "maxLength": 64,
              "minLength": 1,
              "type": "string",
            },
            "budget": {
              "additionalProperties": false,
              "description": "Limits on what it may spend; when one is used up it stops and ends with status "budget". It can never get more than what is left of your own budget (a larger figure is lowered to that).",
              "properties": {
                "maxCostUsd": {
                  "description": "USD its model calls (and its own subagents) may cost, by the price table.",
                  "exclusiveMinimum": 0,
                  "type": "number",
                },
                "maxTokens": {
                  "description": "Tokens of every kind its model calls (and its own subagents) may use.",
                  "exclusiveMinimum": 0,
                  "maximum": 9007199254740991,
                  "type": "integer",
                },
                "maxTurns": {
                  "description": "Turns it (and its own subagents) may run.",
                  "exclusiveMinimum": 0,
                  "maximum": 9007199254740991,
                  "type": "integer",
                },
                "maxWallMs": {
                  "description": "Milliseconds it may take from its start, idle time included.",
                  "exclusiveMinimum": 0,
                  "maximum": 9007199254740991,
                  "type": "integer",
                },
              },
              "type": "object",
            },
            "context": {
              "description": "'fresh' (default): an empty conversation. 'fork': starts from a copy of your conversation so far.",
              "enum": [
                "fresh",
                "fork",
              ],
              "type": "string",
            },
            "instructions": {
              "description": "Extra standing instructions for the subagent (appended to its system prompt).",
              "maxLength": 1048576,
              "minLength": 1,
              "type": "string",
            },
            "label": {
              "description": "A short name for the subagent (a few words). Required when mode is 'continuable' (with agent, it defaults to the agent's name).",
              "maxLength": 80,
              "minLength": 1,
              "type": "string",
            },
            "mode": {
              "description": "'one-shot' (default): runs once and returns its result. 'continuable': keeps its conversation; you can send_message it more work later.",
              "enum": [
                "one-shot",
                "continuable",
              ],
              "type": "string",
            },
            "model": {
              "description": "The model to run it on; omit to use the default.",
              "maxLength": 200,
              "minLength": 1,
              "type": "string",
            },
            "outputSchema": {
              "additionalProperties": {},
              "description": "One-shot only: a JSON Schema its final message must match (as JSON). A mismatch is reported as an error in the result.",
              "propertyNames": {
                "type": "string",
              },
              "type": "object",
            },
            "persona": {
              "description": "Who the subagent should be (replaces the default persona), e.g. "a meticulous security reviewer".",
              "maxLength": 10000,
              "minLength": 1,
              "type": "string",
            },
            "prompt": {
              "description": "The task. A 'fresh' subagent sees nothing of your conversation, so include everything it needs: goal, files, constraints, what to return.",
              "maxLength": 1048576,
              "minLength": 1,
              "type": "string",
            },
            "tools": {
              "additionalProperties": false,
              "description": "Limit the tools the subagent may call.",
              "properties": {
                "allow": {
                  "description": "Only these tools.",
                  "items": {
                    "maxLength": 200,
                    "minLength": 1,
                    "type": "string",
                  },
                  "maxItems": 256,
                  "type": "array",
                },
                "deny": {
                  "description": "Not these tools.",
                  "items": {
                    "maxLength": 200,
                    "minLength": 1,
                    "type": "string",
                  },
                  "maxItems": 256,
                  "type": "array",
                },
              },
              "type": "object",
            },
            "wait": {
              "description": "One-shot only. true (default): wait and return its final result. false: return its id at once; collect the result later with wait_agents.",
              "type": "boolean",
            },
          },
          "required": [
            "prompt",
          ],
          "type": "object",
        },
        "wait_agents": {
          "$schema": "https://json-schema.org/draft/2020-12/schema",
          "additionalProperties": false,
          "properties": {
            "ids": {
              "description": "The ids of the subagents to wait for (yours or your subagents’ own).",
              "items": {
                "maxLength": 1024,
                "minLength": 1,
                "type": "string",
              },
              "maxItems": 32,
              "minItems": 1,
              "type": "array",
            },
            "timeout_seconds": {
              "description": "How long to wait at most (default 60). Subagents still working then are reported as running.",
              "maximum": 600,
              "minimum": 0,
              "type": "number",
            },
          },
          "required": [
            "ids",
          ],
          "type": "object",
        },
      }
    `)
  })

  it('needs the calling agent, and rejects input that fails its schema, for every tool', async () => {
    const { runtime, parent } = await host()
    const valid: Record<string, unknown> = {
      subagent: { prompt: 'p' },
      send_message: { id: 'c', message: 'm' },
      wait_agents: { ids: ['c'] },
      interrupt_agent: { id: 'c' },
      close_agent: { id: 'c' },
      report: { message: 'm' },
      list_agents: {},
    }
    for (const tool of subagentControlTools(runtime)) {
      expect(await codeOf(tool.execute(valid[tool.name], { agent: { id: '' } }))).toBe('TOOL_SUBAGENT_CONTROL_INVALID_CONTEXT')
      expect(await codeOf(tool.execute(valid[tool.name], undefined as never))).toBe('TOOL_SUBAGENT_CONTROL_INVALID_CONTEXT')
      const error = await tool.execute({ surprise: true }, { agent: parent }).then(
        () => undefined,
        (e: unknown) => e,
      )
      expect(isDshError(error, 'TOOL_SUBAGENT_CONTROL_INVALID_INPUT')).toBe(true)
      expect((error as Error).message).toContain('Unrecognized key: "surprise"')
      expect((error as Error).message).toContain(`${tool.name} input is invalid`)
    }
  })
})

describe('subagent', () => {
  it('awaits a one-shot and returns its result; starts a continuable (or an unawaited one-shot) and returns its id at once', async () => {
    const { tool, parent, runtime } = await host()
    const once = await tool('subagent').execute({ prompt: 'count the files', label: 'counter' }, { agent: parent })
    expect(once).toMatchObject({ mode: 'one-shot', label: 'counter', status: 'completed', result: 'done: count the files' })
    expect(once.text).toBe(`${(once as unknown as { id: string }).id} (one-shot "counter") completed.\nResult:\ndone: count the files`)

    const bg = await tool('subagent').execute(
      { prompt: 'watch', label: 'held watcher', mode: 'continuable', context: 'fork' },
      { agent: parent },
    )
    const id = (bg as unknown as { id: string }).id
    expect(bg).toMatchObject({ mode: 'continuable', label: 'held watcher', status: 'running' })
    expect(bg.text).toBe(
      `Started ${id} (continuable "held watcher"). It runs in the background; use send_message to give it more work, wait_agents to collect its result, close_agent when done.`,
    )
    expect(runtime.isRunning(id)).toBe(true)
    const later = await tool('subagent').execute({ prompt: 'x', wait: false }, { agent: parent })
    expect(later.text).toBe(
      `Started ${(later as unknown as { id: string }).id} (one-shot (no label)). Collect its result with wait_agents.`,
    )
  })

  it('validates the result against outputSchema: parsed output, or invalid-output with a typed error in the result', async () => {
    const { tool, parent } = await host()
    const outputSchema = { type: 'object', properties: { files: { type: 'integer' } }, required: ['files'] }
    const good = await tool('subagent').execute({ prompt: '{"files":3}', outputSchema }, { agent: parent })
    expect(good).toMatchObject({ status: 'completed', output: { files: 3 } })
    const bad = await tool('subagent').execute({ prompt: '{"files":"three"}', outputSchema }, { agent: parent })
    expect(bad).toMatchObject({ status: 'invalid-output', error: { code: 'SUBAGENT_INVALID_OUTPUT' } })
    expect(bad.text).toContain('invalid-output.\nError SUBAGENT_INVALID_OUTPUT: ')
  })

  it.each([
    ['a continuable without a label', { prompt: 'p', mode: 'continuable' }, 'label: a continuable subagent needs a label'],
    ['wait on a continuable', { prompt: 'p', mode: 'continuable', label: 'x', wait: true }, 'wait: only a one-shot'],
    [
      'an outputSchema on a continuable',
      { prompt: 'p', mode: 'continuable', label: 'x', outputSchema: {} },
      'outputSchema: outputSchema applies to one-shot',
    ],
    ['an empty tool limit', { prompt: 'p', tools: {} }, 'tools: give allow and/or deny'],
    ['an empty prompt', { prompt: '' }, 'prompt:'],
    ['an unknown context', { prompt: 'p', context: 'shared' }, 'context:'],
  ])('rejects %s', async (_name, input, fragment) => {
    const { tool, parent } = await host()
    const error = await tool('subagent')
      .execute(input, { agent: parent })
      .then(
        () => undefined,
        (e: unknown) => e,
      )
    expect(isDshError(error, 'TOOL_SUBAGENT_CONTROL_INVALID_INPUT')).toBe(true)
    expect((error as Error).message).toContain(fragment)
  })

  it('passes runtime refusals through with their codes (caller not live, invalid outputSchema)', async () => {
    const { tool, parent } = await host()
    expect(await codeOf(tool('subagent').execute({ prompt: 'p' }, { agent: { id: 'ghost' } }))).toBe('SUBAGENT_PARENT_NOT_LIVE')
    expect(await codeOf(tool('subagent').execute({ prompt: 'p', outputSchema: { type: 'bogus' } }, { agent: parent }))).toBe(
      'SUBAGENT_INVALID_DESCRIPTOR',
    )
  })
})

describe('send_message, wait_agents, interrupt_agent, close_agent', () => {
  it('queues for a busy child, starts an idle one, and waits for both', async () => {
    const { runtime, tool, parent, held } = await host()
    const busy = (await tool('subagent').execute(
      { prompt: 'work', label: 'held busy', mode: 'continuable' },
      { agent: parent },
    )) as unknown as { id: string }
    const queued = await tool('send_message').execute({ id: busy.id, message: 'then this' }, { agent: parent })
    expect(queued).toEqual({
      text: `${busy.id} is busy; your message is queued (position 1) and will be delivered when its current turn ends.`,
      id: busy.id,
      status: 'queued',
      position: 1,
    })
    const list = await tool('list_agents').execute({}, { agent: parent })
    expect(list.text).toBe(`${busy.id} [running] — held busy`)
    const table = await createListAgentsTool(runtime, { format: 'table' }).execute({}, { agent: parent })
    expect(table.text).toBe(`${busy.id}  running (1 queued)  continuable  "held busy"`)
    const timedOut = await tool('wait_agents').execute({ ids: [busy.id], timeout_seconds: 0.05 }, { agent: parent })
    expect(timedOut.text).toBe(`${busy.id}  running (1 queued)  (not finished before the timeout)`)
    held.open()
    const settled = await tool('wait_agents').execute({ ids: [busy.id, 'ghost'] }, { agent: parent })
    expect(settled.text).toBe(`${busy.id}  completed\n  done: then this\nghost  not found (no such subagent)`)
    const started = await tool('send_message').execute({ id: busy.id, message: 'once more' }, { agent: parent })
    expect(started).toEqual({ text: `${busy.id} is working on your message.`, id: busy.id, status: 'started' })
  })

  it('renders every wait state', () => {
    expect(
      renderWaitAgents([
        { id: 'a', state: 'settled', reason: 'error', error: 'X: broke', text: 'line 1\nline 2' },
        { id: 'b', state: 'settled' },
        { id: 'c', state: 'closed' },
        { id: 'd', state: 'running', queued: 0 },
      ]),
    ).toBe(
      [
        'a  error\n  error: X: broke\n  line 1\n  line 2',
        'b  settled\n  (no final message)',
        'c  closed',
        'd  running  (not finished before the timeout)',
      ].join('\n'),
    )
  })

  it('lets only the parent or an ancestor interrupt, wait for or close a child; anyone else gets SUBAGENT_UNAUTHORIZED', async () => {
    const { tool, parent, stranger } = await host()
    const child = (await tool('subagent').execute(
      { prompt: 'work', label: 'held child', mode: 'continuable' },
      { agent: parent },
    )) as unknown as { id: string }
    expect(await codeOf(tool('interrupt_agent').execute({ id: child.id }, { agent: stranger }))).toBe('SUBAGENT_UNAUTHORIZED')
    expect(await codeOf(tool('wait_agents').execute({ ids: [child.id] }, { agent: stranger }))).toBe('SUBAGENT_UNAUTHORIZED')
    expect(await codeOf(tool('close_agent').execute({ id: child.id }, { agent: stranger }))).toBe('SUBAGENT_UNAUTHORIZED')
    expect(await codeOf(tool('send_message').execute({ id: child.id, message: 'hi' }, { agent: stranger }))).toBe('SUBAGENT_UNAUTHORIZED')
    expect(await codeOf(tool('interrupt_agent').execute({ id: 'ghost' }, { agent: parent }))).toBe('SUBAGENT_NOT_FOUND')
    const interrupted = await tool('interrupt_agent').execute({ id: child.id }, { agent: parent })
    expect(interrupted).toEqual({ text: `${child.id} was interrupted.`, id: child.id, interrupted: true })
    expect((await tool('interrupt_agent').execute({ id: child.id }, { agent: parent })).text).toBe(
      `${child.id} was not running; nothing to interrupt.`,
    )
  })

  it('interrupt_agent returns once the interrupted turn has ended, and the queued messages still run after it', async () => {
    const { tool, parent } = await host()
    const busy = (await tool('subagent').execute(
      { prompt: 'work', label: 'held worker', mode: 'continuable' },
      { agent: parent },
    )) as unknown as { id: string }
    await tool('send_message').execute({ id: busy.id, message: 'then this' }, { agent: parent })
    expect(await tool('interrupt_agent').execute({ id: busy.id }, { agent: parent })).toMatchObject({ interrupted: true })
    expect((await tool('wait_agents').execute({ ids: [busy.id] }, { agent: parent })).text).toBe(`${busy.id}  completed\n  done: then this`)
    expect(parent.events.filter((e) => e.type === 'subagent/notice').map((e) => (e.data as { reason?: string }).reason)).toEqual([
      'cancelled',
      'completed',
    ])
  })

  it('closes a continuable child for good; closing again, messaging it, or closing a one-shot are typed errors', async () => {
    const { tool, parent } = await host()
    const busy = (await tool('subagent').execute(
      { prompt: 'work', label: 'held closing', mode: 'continuable' },
      { agent: parent },
    )) as unknown as { id: string }
    await tool('send_message').execute({ id: busy.id, message: 'a' }, { agent: parent })
    await tool('send_message').execute({ id: busy.id, message: 'b' }, { agent: parent })
    const closed = await tool('close_agent').execute({ id: busy.id }, { agent: parent })
    expect(closed).toEqual({
      text: `${busy.id} is closed. Its running turn was interrupted. 2 queued messages were dropped.`,
      id: busy.id,
      interrupted: true,
      dropped: 2,
    })
    expect(await codeOf(tool('close_agent').execute({ id: busy.id }, { agent: parent }))).toBe('SUBAGENT_CLOSED')
    expect(await codeOf(tool('send_message').execute({ id: busy.id, message: 'c' }, { agent: parent }))).toBe('SUBAGENT_CLOSED')
    expect((await tool('wait_agents').execute({ ids: [busy.id] }, { agent: parent })).text).toBe(`${busy.id}  closed`)
    const once = (await tool('subagent').execute({ prompt: 'p' }, { agent: parent })) as unknown as { id: string }
    expect(await codeOf(tool('close_agent').execute({ id: once.id }, { agent: parent }))).toBe('SUBAGENT_NOT_RESUMABLE')
    expect(await codeOf(tool('send_message').execute({ id: once.id, message: 'x' }, { agent: parent }))).toBe('SUBAGENT_NOT_RESUMABLE')
    expect(await codeOf(tool('send_message').execute({ id: 'ghost', message: 'x' }, { agent: parent }))).toBe('SUBAGENT_NOT_FOUND')
    const idle = (await tool('subagent').execute({ prompt: 'p', label: 'idle', mode: 'continuable' }, { agent: parent })) as unknown as {
      id: string
    }
    await tool('wait_agents').execute({ ids: [idle.id] }, { agent: parent })
    expect((await tool('close_agent').execute({ id: idle.id }, { agent: parent })).text).toBe(`${idle.id} is closed.`)
  })
})

describe('report', () => {
  it("reaches the parent as a notice (the child's driver calls the tool); a top-level session has nobody to report to", async () => {
    const { tool, parent } = await host()
    await tool('subagent').execute({ prompt: 'look', label: 'reporter' }, { agent: parent })
    const notices = parent.events.filter((e) => e.type === 'subagent/notice').map((e) => e.data)
    expect(notices).toEqual([
      { kind: 'report', child: expect.any(String), mode: 'one-shot', label: 'reporter', text: 'found it' },
      { kind: 'settled', child: expect.any(String), mode: 'one-shot', label: 'reporter', reason: 'completed', text: 'reported' },
    ])
    expect(await codeOf(tool('report').execute({ message: 'hello' }, { agent: parent }))).toBe('SUBAGENT_NOT_A_SUBAGENT')
    expect(await codeOf(tool('report').execute({ message: '' }, { agent: parent }))).toBe('TOOL_SUBAGENT_CONTROL_INVALID_INPUT')
    expect(await codeOf(tool('report').execute({ message: 'x' }, { agent: { id: 'ghost' } }))).toBe('SUBAGENT_NOT_FOUND')
    expect(createReportTool({} as never).description).toContain('parent')
  })

  it('reports SUBAGENT_PARENT_NOT_LIVE when the parent has gone cold', async () => {
    const { tool, parent, runtime } = await host()
    const child = (await tool('subagent').execute({ prompt: 'p', label: 'c', mode: 'continuable' }, { agent: parent })) as unknown as {
      id: string
    }
    await tool('wait_agents').execute({ ids: [child.id] }, { agent: parent })
    const sessions = ctx!.require('sessions')
    await sessions.dispose(parent.id)
    const live = sessions.restore(await ctx!.require('sessionPersistence').load(child.id as never))
    expect(await codeOf(tool('report').execute({ message: 'late' }, { agent: live }))).toBe('SUBAGENT_PARENT_NOT_LIVE')
    expect(runtime.isRunning(child.id)).toBe(false)
    expect(createListAgentsTool(runtime).name).toBe('list_agents')
  })
})
