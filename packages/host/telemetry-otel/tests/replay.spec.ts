import { createHost } from '@dsh/host'
import type { SessionSeq, StoredSessionEvent } from '@dsh/session'
import { tempDir } from '@dsh/test-kit'
import { describe, expect, it } from 'vitest'
import { replaySessionTraces, sessionTelemetryPlugin, TRACE_CONTEXT_EVENT } from '../src/index.js'
import { spanTree } from '../src/testing/index.js'
import { afterThisTest, receiver } from './support/cleanup.js'

function log(events: [type: string, data: unknown][]): StoredSessionEvent[] {
  return events.map(([type, data], seq) => ({ type, seq: seq as SessionSeq, time: 1_000 + 10 * seq, data: data as never }))
}

describe('replay', () => {
  it('step/start and step/end make the steps: their model, finish and usage (disjoint counts added up as the conventions count them)', async () => {
    const otlp = await receiver()
    const events = log([
      ['turn/start', { turn: 1 }],
      ['step/start', { model: 'm-1', provider: 'p-1' }],
      ['tool/call', { turn: 1, callId: 'a', name: 'read', arguments: {} }],
      ['tool/result', { turn: 1, callId: 'a', content: 'ok' }],
      ['step/end', { usage: { input: 10, output: 2, cacheRead: 5, reasoning: 1 }, finish: 'tool_calls' }],
      ['step/start', { model: 'm-2', provider: 'p-1' }],
      ['assistant/message', { turn: 1, text: 'done' }],
      ['step/end', { usage: { inputTokens: 7, outputTokens: 3 }, finish: 'stop', model: 'm-2-0613' }],
      ['turn/end', { turn: 1, reason: 'completed' }],
    ])
    await replaySessionTraces([{ header: { id: 's', delegationDepth: 0 }, inheritedEventCount: 0, events }], { otlp: otlp.url })
    expect(spanTree(otlp.spans)).toEqual([['invoke_agent dsh', ['chat m-2', ['chat m-1', ['execute_tool read']]]]])
    const attributes = (name: string) => otlp.spans.find((span) => span.name === name)!.attributes
    expect(attributes('chat m-1')).toMatchObject({
      'gen_ai.request.model': 'm-1',
      'gen_ai.provider.name': 'p-1',
      'gen_ai.usage.input_tokens': 15,
      'gen_ai.usage.output_tokens': 3,
      'gen_ai.usage.cache_read.input_tokens': 5,
      'gen_ai.usage.reasoning.output_tokens': 1,
      'gen_ai.response.finish_reasons': ['tool_calls'],
    })
    expect(attributes('chat m-2')).toMatchObject({
      'gen_ai.usage.input_tokens': 7,
      'gen_ai.usage.output_tokens': 3,
      'gen_ai.response.model': 'm-2-0613',
    })
    expect(attributes('invoke_agent dsh')).toMatchObject({ 'gen_ai.usage.input_tokens': 22, 'gen_ai.usage.output_tokens': 6 })
  })

  it("a compaction's summarizing model call is a chat span with its usage: under the turn it ran in (counted in the turn's usage), or a trace of its own outside any turn; a failed one is an ERROR span, a template summary none", async () => {
    const otlp = await receiver()
    const summary = (id: string, usage?: unknown) => ({
      compactionId: id,
      summary: [{ type: 'text', text: 'so far' }],
      from: 0,
      to: 4,
      ...(usage === undefined ? {} : { provider: 'p-1', model: 'm-sum', usage }),
    })
    const events = log([
      ['turn/start', { turn: 1 }],
      ['step/start', { model: 'm-1', provider: 'p-1' }],
      ['step/end', { usage: { input: 100, output: 50 }, finish: 'stop' }],
      ['turn/end', { turn: 1, reason: 'completed' }],
      // `dsh compact`: outside any turn.
      ['compaction/start', { compactionId: 'manual', reason: 'manual' }],
      ['compaction/summary', summary('manual', { input: 60, output: 6, cacheRead: 40 })],
      ['compaction/end', { compactionId: 'manual' }],
      ['turn/start', { turn: 2 }],
      // A budget compaction that failed, then one that summarized, before the turn's model step.
      ['compaction/start', { compactionId: 'failed', reason: 'budget' }],
      ['compaction/end', { compactionId: 'failed', error: 'The model server failed after 4 attempts (HTTP 500): down' }],
      ['compaction/start', { compactionId: 'budget', reason: 'budget' }],
      ['compaction/summary', summary('budget', { input: 70, output: 6 })],
      ['compaction/end', { compactionId: 'budget' }],
      ['step/start', { model: 'm-1', provider: 'p-1' }],
      ['step/end', { usage: { input: 100, output: 50 }, finish: 'stop' }],
      ['turn/end', { turn: 2, reason: 'completed' }],
      // A template summary calls no model.
      ['compaction/start', { compactionId: 'template', reason: 'manual' }],
      ['compaction/summary', summary('template')],
      ['compaction/end', { compactionId: 'template' }],
    ])
    const result = await replaySessionTraces([{ header: { id: 's', delegationDepth: 0 }, inheritedEventCount: 0, events }], {
      otlp: otlp.url,
    })
    expect(spanTree(otlp.spans)).toEqual([
      'chat m-sum',
      ['invoke_agent dsh', ['chat m-1', 'chat m-sum', 'chat']],
      ['invoke_agent dsh', ['chat m-1']],
    ])
    expect(result.stats).toMatchObject({ exported: 7, dropped: 0 })
    const byCompaction = (id: string) => otlp.spans.find((span) => span.attributes['dsh.compaction.id'] === id)!
    const manual = byCompaction('manual')
    expect(manual.parentSpanId).toBeUndefined()
    expect(result.traceIds).toHaveLength(3)
    expect(result.traceIds).toContain(manual.traceId)
    expect(manual).toMatchObject({ start: 1_040, end: 1_050 })
    expect(manual.attributes).toMatchObject({
      'gen_ai.operation.name': 'chat',
      'gen_ai.request.model': 'm-sum',
      'gen_ai.provider.name': 'p-1',
      'gen_ai.usage.input_tokens': 100,
      'gen_ai.usage.output_tokens': 6,
      'gen_ai.usage.cache_read.input_tokens': 40,
      'dsh.compaction.reason': 'manual',
    })
    const budget = byCompaction('budget')
    const turn2 = otlp.spans.find((span) => span.attributes['dsh.turn'] === 2)!
    expect(budget.parentSpanId).toBe(turn2.spanId)
    expect(budget.attributes).toMatchObject({
      'gen_ai.usage.input_tokens': 70,
      'gen_ai.usage.output_tokens': 6,
      'dsh.compaction.reason': 'budget',
    })
    expect(turn2.attributes).toMatchObject({ 'gen_ai.usage.input_tokens': 170, 'gen_ai.usage.output_tokens': 56 })
    const failed = byCompaction('failed')
    expect(failed.parentSpanId).toBe(turn2.spanId)
    // Its end names no model, and the replay was given none.
    expect(failed.name).toBe('chat')
    expect(failed.status).toEqual({ code: 2, message: 'The model server failed after 4 attempts (HTTP 500): down' })
    expect(failed.attributes['error.type']).toBe('compaction_failed')
    expect(failed.attributes['gen_ai.usage.input_tokens']).toBeUndefined()
    expect(otlp.spans.some((span) => span.attributes['dsh.compaction.id'] === 'template')).toBe(false)
  })

  it('a malformed trace context is ignored (the turn starts a trace of its own); an assistant error fails the step and the turn', async () => {
    const otlp = await receiver()
    const events = log([
      [TRACE_CONTEXT_EVENT, { traceparent: '00-not-a-trace-01' }],
      ['turn/start', { turn: 1 }],
      ['assistant/error', { turn: 1, code: 'DRIVER_OPENAI_REQUEST_FAILED', message: 'HTTP 500' }],
      ['turn/end', { turn: 1, reason: 'error' }],
    ])
    const result = await replaySessionTraces(
      [{ header: { id: 'kid', parentSession: 'p', delegationDepth: 1 }, inheritedEventCount: 0, events }],
      { otlp: otlp.url },
    )
    const turn = otlp.spans.find((span) => span.name === 'invoke_agent subagent')!
    expect(turn.parentSpanId).toBeUndefined()
    expect(result.traceIds).toEqual([turn.traceId])
    expect(otlp.spans.map((span) => [span.name, span.status, span.attributes['error.type']]).sort()).toEqual([
      ['chat', { code: 2, message: 'DRIVER_OPENAI_REQUEST_FAILED: HTTP 500' }, 'DRIVER_OPENAI_REQUEST_FAILED'],
      ['invoke_agent subagent', { code: 2, message: 'DRIVER_OPENAI_REQUEST_FAILED: HTTP 500' }, 'DRIVER_OPENAI_REQUEST_FAILED'],
    ])
  })
})

describe('across processes', () => {
  it('a child restored by another host, resumed there, joins the trace of the tool call its log names', async () => {
    const { dir, cleanup } = tempDir('dsh-otel-two-')
    afterThisTest(cleanup)
    const first = await receiver()
    const a = await createHost({ root: dir })
    await a.ctx.activate(sessionTelemetryPlugin({ otlp: first.url }))
    const parent = a.sessions.create({ id: 'parent' })
    parent.append('turn/start', { turn: 1 })
    parent.append('tool/call', { turn: 1, callId: 'c1', name: 'subagent', arguments: {} })
    const handle = a.subagents.spawn(parent, { mode: 'continuable', label: 'helper', context: 'fresh', prompt: 'one', id: 'kid' })
    await handle.done
    parent.append('tool/result', { turn: 1, callId: 'c1', content: null })
    parent.append('turn/end', { turn: 1, reason: 'completed' })
    await a.dispose()
    const call = first.spans.find((span) => span.name === 'execute_tool subagent')!

    // Another host over the same root: the child is cold there; a new turn of it joins the first trace.
    const second = await receiver()
    const b = await createHost({ root: dir })
    afterThisTest(() => b.dispose())
    await b.ctx.activate(sessionTelemetryPlugin({ otlp: second.url }))
    const kid = b.sessions.restore(await b.persistence.load(handle.id))
    kid.append('turn/start', { turn: 2 })
    kid.append('assistant/message', { turn: 2, text: 'again' })
    kid.append('turn/end', { turn: 2, reason: 'completed' })
    await b.ctx.require('sessionTelemetry').flush()
    const turns = second.spans.filter((span) => span.name === 'invoke_agent helper')
    expect(turns.map((span) => [span.traceId, span.parentSpanId, span.attributes['dsh.turn']])).toEqual([[call.traceId, call.spanId, 2]])
  })
})
