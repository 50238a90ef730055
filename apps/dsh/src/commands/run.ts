import { escapeTerminal, isDshError, type Services } from '@dsh/context'
import type { AgentTurnOutcome, SessionAttachments } from '@dsh/driver-openai'
import type { Host } from '@dsh/host'
import { type JsonValue, type Session, type SessionEvent, SessionId } from '@dsh/session'
import { appendUserMessage, attachmentResolver } from '@dsh/session-persistence'
import type { SubagentBudgetExceeded, SubagentEndData, SubagentRun, SubagentRuntime, SubagentTool } from '@dsh/subagent'
import {
  type AgentDefinitionSource,
  harnessNotices,
  SUBAGENT_CONTROL_DIALECTS,
  type SubagentControlDialect,
  subagentControlTools,
  waitForChildSettlement,
} from '@dsh/tool-subagent-control'
import { childToolNames, commandAgentDefinitions, offering } from '../agent-definitions-access.js'
import { type CommandIo, intOption, type ParsedCommand } from '../command.js'
import { CliError } from '../errors.js'
import { openHost, terminalLogger, warnIfExposed } from '../host-access.js'
import { interruptedStatus } from '../interrupt.js'
import { otlpEndpoint } from '../otlp.js'
import { firstLine, printJson } from '../output.js'
import { priceTableOf } from '../prices.js'
import { safe } from '../terminal.js'
import { imageOf, modelApiOf } from './run-options.js'
import { type RunModel, runModelOf, type TopTurnOptions } from './run-provider.js'

/** Follow-up turns one `dsh run --dialect harness` gives its agent when background subagents settle. */
export const MAX_WAKES = 32

/** `--dialect dsh|harness` (default `dsh`): the form of the control tools; anything else is `CLI_USAGE`. */
export function dialectOf(command: ParsedCommand): SubagentControlDialect {
  const value = command.string('dialect') ?? 'dsh'
  if (!(SUBAGENT_CONTROL_DIALECTS as readonly string[]).includes(value))
    throw new CliError('CLI_USAGE', `--dialect must be one of ${SUBAGENT_CONTROL_DIALECTS.join(', ')}, got '${value}'.`)
  return value as SubagentControlDialect
}

/**
 * The subagent-control tools an agent started by the CLI (or the MCP server)
 * may call, in `dialect`. In the harness dialect `report` is for subagents
 * only: an `agent` that is not one (a top-level session) is not offered it.
 */
export function controlToolsOf(
  runtime: SubagentRuntime,
  dialect: SubagentControlDialect = 'dsh',
  agent?: Session,
  agents?: AgentDefinitionSource,
): readonly SubagentTool[] {
  const defined = agents === undefined ? {} : { agents }
  if (dialect === 'harness' && agent !== undefined && agent.header.origin !== 'subagent')
    return subagentControlTools(runtime, { dialect, filter: (name) => name !== 'report', ...defined })
  return subagentControlTools(runtime, { dialect, ...defined })
}

/** How the model reads its children's notices: the harness phrasing in the harness dialect, the driver's own otherwise. */
export function noticesOf(dialect: SubagentControlDialect): {
  notices?: Readonly<Record<string, (data: JsonValue) => string | undefined>>
} {
  return dialect === 'harness' ? { notices: harnessNotices } : {}
}

/**
 * `dsh run "<prompt>" [--provider openai|anthropic] [--model M] [--base-url URL] [--resume ID] [--dialect dsh|harness] [--root R]`:
 * one turn of a real agent over an OpenAI-compatible API (or, with
 * `--provider anthropic`, the Anthropic Messages API; `--thinking TOKENS`
 * turns on its extended thinking), with the subagent-control tools, in a
 * session root; the `subagent` tool starts the agents defined in
 * `<root>/.dsh/agents` and `./.dsh/agents` by name. With `--dialect harness` the
 * tools take the harness's shapes and, as the harness does, a background
 * child's settlement wakes the agent: after its turn the command waits for a
 * running child to settle and runs another turn that reads the notice (at
 * most MAX_WAKES such turns). The answer streams to stdout,
 * each child's progress as a line of its own; the session stays in the root
 * for `dsh show`/`dsh agents`. Ctrl-C (SIGINT) or SIGTERM ends the turn
 * `interrupted` (closed and flushed; exit 130 or 143; a second signal quits
 * at once). `--resume ID` loads the session from an existing root
 * (`CLI_ROOT_INVALID` for a missing one, and nothing is created; crash
 * repair closes a turn a killed run left open) and runs the next turn,
 * with the prompt when one is given. `--context-window TOKENS` (the
 * model's window) compacts the session before a step whose context reaches
 * 80% of it (the host has the summarizer, over the same client, so
 * compaction's crash repair runs on every load); without it no step
 * compacts. A budget compaction that fails leaves the context as it is and
 * the turn goes on: one warning line on stderr says why (each distinct
 * failure once), and under --json the document lists them
 * (`compactionErrors: [{session, code, message}]`). `--max-steps N` bounds
 * one turn's model steps (default 32).
 * `--api responses` speaks the Responses API instead of Chat Completions
 * (only new input items after the first request, continuing the previous
 * response). `--image PATH` attaches a png/jpeg/gif/webp image to the
 * prompt: the bytes are stored beside the session (content-addressed), the
 * log holds the reference, and each request carries the image.
 *
 * The API key comes from DSH_API_KEY, else OPENAI_API_KEY or ANTHROPIC_API_KEY by provider, only (never a flag:
 * flags show in `ps`). `--otlp URL` exports the run (every turn, model step,
 * tool call and subagent run, as one trace per top-level turn) as
 * OpenTelemetry spans while it happens; a collector that is down costs
 * dropped spans and one warning, never the run.
 */
export async function run(command: ParsedCommand, io: CommandIo): Promise<number> {
  const prompt = command.args.join(' ').trim()
  const resume = command.string('resume')
  if (prompt.length === 0 && resume === undefined)
    throw new CliError('CLI_USAGE', `'dsh run' needs a prompt: dsh run "what to do" (or --resume ID to continue a session).`)
  const dialect = dialectOf(command)
  const otlpFlag = command.string('otlp')
  const telemetry = otlpFlag === undefined ? undefined : await import('@dsh/session-telemetry-otel')
  const otlp = otlpFlag === undefined || telemetry === undefined ? undefined : otlpEndpoint(otlpFlag, telemetry.parseOtlpEndpoint)
  const model = command.string('model')
  const baseURL = command.string('base-url')
  const api = modelApiOf(command)
  const image = imageOf(command)
  if (image !== undefined && prompt.length === 0)
    throw new CliError('CLI_USAGE', `--image needs a prompt to attach it to: dsh run --image ${image.name} "what to do".`)
  const budget = budgetOf(command)
  // Configuration errors (no key, a bad URL, an unreadable image) surface before the root is touched.
  const runModel = await runModelOf(command, io, {
    ...(model === undefined ? {} : { model }),
    ...(baseURL === undefined ? {} : { baseURL }),
    ...(api === undefined ? {} : { api }),
  })
  // The agent definitions the subagent tool starts by name (<root>/.dsh/agents, ./.dsh/agents), read when it is called.
  // One naming the other provider, or a tool children here are not given, is refused before a child exists.
  const agents = offering(commandAgentDefinitions(command), { provider: runModel.provider, tools: childToolNames(dialect) })
  // A child's cost budget is counted against this table (the runtime refuses one without it).
  const prices = await priceTableOf(command, io)
  const printer = new RunPrinter(io, command.json)
  // A budget compaction that fails lets the step go ahead on the context as it is: said on stderr, and in the JSON document.
  const watched = (service: CompactionService): CompactionService =>
    reportingFailures(service, (agent, error) => printer.compactionFailed(agent, error))
  // Requests are built from the host's sessionContext service (the host is made after the driver it runs).
  // Images and files are read through the root's persistence, one reader per session. A live fork whose log is
  // not written yet reads what it inherited through its source (a written fork's log names the source itself).
  const attachments = (agent: Session): SessionAttachments => {
    const own = attachmentResolver(host.persistence, agent.header.id)
    if (agent.forkSource === undefined) return own
    const source = attachmentResolver(host.persistence, agent.forkSource)
    return {
      resolve: (ref) => own.resolve(ref) ?? source.resolve(ref),
      async load(messages, signal) {
        const list = [...messages]
        return (await own.load(list, signal)) + (await source.load(list, signal))
      },
    }
  }
  const driver = runModel.driver({
    onEvent: (child, event) => printer.child(child, event),
    context: () => host.ctx.get('sessionContext'),
    attachments,
    compaction: () => {
      const service = host.ctx.get('compaction')
      return service === undefined ? undefined : watched(service)
    },
    ...budget,
    ...noticesOf(dialect),
  })
  // Children get the control tools too (narrowed by their toolFilter), so they can delegate in turn.
  // The summarizer (the same client) gives the host service `compaction` and its crash repair.
  // A resumed session is read from an existing root: a missing one is CLI_ROOT_INVALID, and nothing is created.
  const host = await openHost(
    command,
    {
      ...(resume === undefined ? {} : { requireExisting: true }),
      driver,
      tools: (agent, runtime) => controlToolsOf(runtime, dialect, agent, agents),
      summarizer: runModel.summarizer,
      ...(prices === undefined ? {} : { prices }),
    },
    io,
  )
  // How each child's run ended is the runtime's `subagent/end` (a budget stop follows a completed turn).
  host.ctx.on('session/event', (agent, event) => {
    if (event.type === 'subagent/end') printer.ended(agent, event.data as SubagentEndData)
  })
  if (otlp !== undefined && telemetry !== undefined) {
    try {
      await host.ctx.activate(
        telemetry.sessionTelemetryPlugin({ otlp, model: runModel.model, provider: driver.name, logger: terminalLogger(io) }),
      )
    } catch (error) {
      await host.dispose()
      throw error
    }
  }
  let session: Session | undefined
  // SIGINT (Ctrl-C) or SIGTERM ends the turn `interrupted`; each handler is taken once, so a second signal quits at once.
  const controller = new AbortController()
  let received: 'SIGINT' | 'SIGTERM' | undefined
  const onSignal = (name: 'SIGINT' | 'SIGTERM') => (): void => {
    if (received !== undefined) return
    received = name
    process.off('SIGINT', onInterrupt)
    process.off('SIGTERM', onTerminate)
    if (!command.json)
      io.err.write(`\ndsh: ${name === 'SIGINT' ? 'interrupting' : 'terminating'} the turn (Ctrl-C again to quit at once)\n`)
    controller.abort()
  }
  const onInterrupt = onSignal('SIGINT')
  const onTerminate = onSignal('SIGTERM')
  try {
    warnIfExposed(host.root, io)
    session = resume === undefined ? host.sessions.create({ cwd: process.cwd() }) : await loadSession(host, resume)
    printer.begin(session, resume !== undefined)
    process.once('SIGINT', onInterrupt)
    process.once('SIGTERM', onTerminate)
    const turn: TopTurnOptions = {
      session,
      tools: controlToolsOf(host.subagents, dialect, session, agents),
      signal: controller.signal,
      onEvent: (event) => printer.top(event),
      context: host.ctx.require('sessionContext'),
      compaction: watched(host.ctx.require('compaction')),
      attachments,
      ...budget,
      ...noticesOf(dialect),
    }
    // With --image the prompt and the image's reference are one user message; the bytes are stored beside the session first.
    if (image !== undefined) turn.onEvent?.(await appendUserMessage(host.persistence, session, prompt, [image]))
    let outcome = await runModel.runAgent({ ...turn, ...(prompt.length === 0 || image !== undefined ? {} : { prompt }) })
    if (dialect === 'harness') outcome = await followBackground(host, runModel, turn, outcome, printer)
    printer.end(session, outcome)
    return outcome.reason === 'completed' ? 0 : outcome.reason === 'interrupted' ? interruptedStatus(received ?? 'SIGINT') : 1
  } finally {
    process.off('SIGINT', onInterrupt)
    process.off('SIGTERM', onTerminate)
    // Children still running are drained (their turns close) and everything is flushed.
    await host.dispose()
  }
}

type CompactionService = Services['compaction']

/**
 * `service` with its budget check (`maybeCompact`, what a step calls
 * before its request) telling `report` why a compaction failed. The driver
 * goes on with the context as it is and keeps the failure to the log
 * (`compaction/end {error}`); the CLI says it. A cancellation (the turn
 * interrupted) is no failure.
 */
function reportingFailures(service: CompactionService, report: (session: Session, error: unknown) => void): CompactionService {
  // Every other member is the service's own (inherited, so a method that uses `this` still finds the rest).
  const watched: CompactionService = Object.create(service)
  return Object.assign(watched, {
    async maybeCompact(session: Session, options: Parameters<CompactionService['maybeCompact']>[1]) {
      try {
        return await service.maybeCompact(session, options)
      } catch (error) {
        if (options.signal?.aborted !== true && !isDshError(error, 'CANCELLED')) report(session, error)
        throw error
      }
    },
  })
}

/** `--context-window TOKENS` (the budget trigger's window; without it no step compacts) and `--max-steps N`, each at least 1. */
function budgetOf(command: ParsedCommand): { contextWindow?: number; maxSteps?: number } {
  const contextWindow = intOption(command, 'context-window', { min: 1 })
  const maxSteps = intOption(command, 'max-steps', { min: 1 })
  return { ...(contextWindow === undefined ? {} : { contextWindow }), ...(maxSteps === undefined ? {} : { maxSteps }) }
}

/**
 * The harness's wake-up: while the last turn completed, wait for one of the
 * session's background children to settle (or take a notice that landed
 * after the turn's last model request), then run a turn with no new prompt,
 * which reads the notice. Stops when nothing is running and nothing is
 * unread, after MAX_WAKES turns, or on Ctrl-C (`interrupted`).
 */
async function followBackground(
  host: Host,
  runModel: RunModel,
  turn: TopTurnOptions,
  first: AgentTurnOutcome,
  printer: RunPrinter,
): Promise<AgentTurnOutcome> {
  let outcome = first
  for (let wakes = 0; outcome.reason === 'completed' && wakes < MAX_WAKES; wakes++) {
    try {
      if (unreadNotices(turn.session).length === 0 && !(await waitForChildSettlement(host.subagents, turn.session, turn.signal))) break
    } catch (error) {
      if (turn.signal.aborted || isDshError(error, 'CANCELLED')) return { reason: 'interrupted' }
      throw error
    }
    for (const notice of unreadNotices(turn.session)) printer.notice(notice)
    outcome = await runModel.runAgent(turn)
  }
  return outcome
}

/**
 * The notices (as the harness phrases them) the model has not read: those
 * after the last model request of the session's last completed turn. A turn's
 * last request is built right after its `turn/start` or its last
 * `tool/result` before the final `assistant/message`.
 */
function unreadNotices(session: Session): string[] {
  const events = session.events
  const types = events.map((event) => event.type)
  const answer = types.lastIndexOf('assistant/message')
  const request = answer < 0 ? -1 : Math.max(types.lastIndexOf('tool/result', answer), types.lastIndexOf('turn/start', answer))
  const render = harnessNotices['subagent/notice']!
  const unread: string[] = []
  for (const event of events.slice(request + 1)) {
    const text = event.type === 'subagent/notice' ? render(event.data as JsonValue) : undefined
    if (text !== undefined) unread.push(text)
  }
  return unread
}

/** The session to continue: live already, or loaded from the root (crash repair closes a turn a killed run left open). */
async function loadSession(host: Host, id: string): Promise<Session> {
  const live = host.sessions.get(id)
  if (live !== undefined) return live
  return host.sessions.restore(await host.persistence.load(SessionId(id)))
}

/** What the terminal shows: the streamed answer, tool calls, and one line per child step; escaped, since all of it is data. */
class RunPrinter {
  readonly #io: CommandIo
  readonly #json: boolean
  #atLineStart = true
  /** Each child's name on its progress lines (its label, else its id), as its runs show it. */
  readonly #labels = new Map<string, string>()
  /** Failed budget compactions, each said once (a step after a failure tries again, and may fail alike). */
  readonly #compactionErrors = new Map<string, { session: string; code: string; message: string }>()

  constructor(io: CommandIo, json: boolean) {
    this.#io = io
    this.#json = json
  }

  begin(session: Session, resumed: boolean): void {
    if (this.#json) return
    this.#line(safe`${resumed ? 'resuming' : 'session'} ${session.id}`)
  }

  /** An event of the top-level turn. */
  top(event: SessionEvent): void {
    if (this.#json) return
    const data = event.data as Record<string, unknown>
    if (event.type === 'assistant/chunk') this.#write(escapeStream(String(data.delta)))
    else if (event.type === 'tool/call') this.#line(safe`[tool] ${data.name} ${JSON.stringify(data.arguments)}`)
    else if (event.type === 'tool/result')
      this.#line(safe`[tool ${data.isError === true ? 'error' : 'result'}] ${firstLine(resultText(data.content))}`)
    else if (event.type === 'assistant/error') this.#line(safe`[error] ${data.code}: ${data.message}`)
  }

  /** An event of a child's run (children's text is summarized, not streamed; how the run ended comes from `ended`). */
  child(run: SubagentRun, event: SessionEvent): void {
    if (this.#json) return
    const data = event.data as Record<string, unknown>
    const who = run.identity?.label ?? run.session.id
    this.#labels.set(run.session.id, who)
    if (event.type === 'turn/start') this.#line(safe`  [${who}] started (${run.session.id})`)
    else if (event.type === 'tool/call') this.#line(safe`  [${who}] ${data.name}`)
    else if (event.type === 'assistant/message') this.#line(safe`  [${who}] answered: ${firstLine(String(data.text))}`)
    else if (event.type === 'assistant/error') this.#line(safe`  [${who}] error ${data.code}: ${data.message}`)
  }

  /**
   * A child's `subagent/end`: the runtime's reason, which is the turn's
   * unless the run was stopped on a budget (the turn may have completed),
   * drained, or its output refused. A budget end says which budget, what it
   * allowed and what was spent.
   */
  ended(child: Session, data: SubagentEndData): void {
    if (this.#json) return
    const who = this.#labels.get(child.id) ?? child.id
    if (data.reason === 'closed') this.#line(safe`  [${who}] closed`)
    else if (data.reason === 'budget' && data.exceeded !== undefined)
      this.#line(safe`  [${who}] ended: budget (${exceededText(data.exceeded, child.id)})`)
    else this.#line(safe`  [${who}] ended: ${data.reason}${data.error === undefined ? '' : ` (${firstLine(data.error)})`}`)
  }

  /** A notice that wakes the agent for another turn (harness dialect). */
  notice(text: string): void {
    if (this.#json) return
    this.#line(safe`[notice] ${firstLine(text, 160)}`)
  }

  /** A budget compaction of `session` (the top-level one or a child) failed: one warning line on stderr; with --json, kept for the document. */
  compactionFailed(session: Session, error: unknown): void {
    const code = isDshError(error) ? error.code : 'CLI_INTERNAL'
    const message = error instanceof Error ? error.message : String(error)
    const key = JSON.stringify([session.id, code, message])
    if (this.#compactionErrors.has(key)) return
    this.#compactionErrors.set(key, { session: session.id, code, message })
    this.#io.err.write(`dsh: warning: budget compaction failed (the turn goes on uncompacted): ${escapeTerminal(message)} (${code})\n`)
  }

  end(session: Session, outcome: { reason: string; text?: string; error?: unknown }): void {
    if (this.#json) {
      const error = outcome.error as { code?: string; message?: string } | undefined
      const compactionErrors = [...this.#compactionErrors.values()]
      printJson(
        {
          session: session.id,
          reason: outcome.reason,
          ...(outcome.text === undefined ? {} : { text: outcome.text }),
          ...(error === undefined ? {} : { error: { code: error.code ?? 'CLI_INTERNAL', message: error.message ?? String(error) } }),
          ...(compactionErrors.length === 0 ? {} : { compactionErrors }),
        },
        this.#io.out,
      )
      return
    }
    this.#line(safe`[turn ${outcome.reason}] session ${session.id}: dsh show ${session.id} | dsh agents ${session.id}`)
  }

  #write(text: string): void {
    if (text.length === 0) return
    this.#io.out.write(text)
    this.#atLineStart = text.endsWith('\n')
  }

  #line(text: string): void {
    this.#io.out.write(`${this.#atLineStart ? '' : '\n'}${text}\n`)
    this.#atLineStart = true
  }
}

/** Which budget ended a child, its limit and what was spent, and whose budget it was when it was an ancestor's. */
function exceededText(exceeded: SubagentBudgetExceeded, child: string): string {
  const whose = exceeded.session === child ? '' : `, shared with ${exceeded.session}`
  if (exceeded.unpriced !== undefined) return `cost: a step could not be priced, ${exceeded.unpriced}${whose}`
  const figure = (value: number): string =>
    exceeded.kind === 'cost' ? `$${Number(value.toFixed(6))}` : exceeded.kind === 'wall' ? `${value} ms` : String(value)
  return `${exceeded.kind}: ${figure(exceeded.spent)} spent of ${figure(exceeded.limit)}${whose}`
}

/** Streamed model text: newlines kept, every other control or bidi character escaped. */
function escapeStream(text: string): string {
  const lines = text.split('\n').map((line) => escapeTerminal(line))
  return lines.join('\n')
}

function resultText(content: unknown): string {
  if (content !== null && typeof content === 'object' && typeof (content as { text?: unknown }).text === 'string')
    return (content as { text: string }).text
  if (content !== null && typeof content === 'object' && typeof (content as { message?: unknown }).message === 'string') {
    return `${String((content as { code?: unknown }).code)}: ${(content as { message: string }).message}`
  }
  return JSON.stringify(content)
}
