import { isCollection, isMap, isScalar, isSeq, LineCounter, type Node, parseDocument, visit, type YAMLError } from 'yaml'
import type { z } from 'zod'
import { AgentDefinitionError } from './errors.js'
import { splitFrontmatter } from './frontmatter.js'
import { type AgentDefinition, type AgentDefinitionScope, agentFrontmatterSchema, MAX_DEFINITION_BYTES } from './schema.js'

/** Where a definition is read from and what name its file gives it. */
export interface DefinitionSource {
  /** The file (as printed in errors). */
  readonly file: string
  readonly scope: AgentDefinitionScope
  /** The name the file's name gives (`<name>.md`); the frontmatter's `name` must equal it. */
  readonly expectedName?: string
}

/** `AGENT_DEFINITION_INVALID` naming the file and line (and column when known). */
export function invalidDefinition(file: string, line: number, why: string, extra: Record<string, unknown> = {}): AgentDefinitionError {
  return new AgentDefinitionError('AGENT_DEFINITION_INVALID', `${file}:${line}: ${why}`, { details: { file, line, ...extra } })
}

/**
 * Parses and validates one definition file's text. The frontmatter is read by
 * the `yaml` package (YAML 1.2 core schema, unique keys); the result is
 * checked by the strict zod schema. Every problem is an
 * `AGENT_DEFINITION_INVALID` whose message starts `<file>:<line>:`: a YAML
 * error at the parser's position, a schema problem at the line of the key it
 * concerns (an unknown key at that key, a wrong value at the value, a missing
 * key at the opening fence).
 */
export function parseAgentDefinition(text: string, source: DefinitionSource): AgentDefinition {
  const { file } = source
  if (Buffer.byteLength(text, 'utf8') > MAX_DEFINITION_BYTES) {
    throw invalidDefinition(file, 1, `the file is larger than ${MAX_DEFINITION_BYTES} bytes`)
  }
  const split = splitFrontmatter(text)
  if (!('yaml' in split)) throw invalidDefinition(file, split.line, split.message)
  const lineCounter = new LineCounter()
  const doc = parseDocument(split.yaml, { lineCounter, prettyErrors: true, schema: 'core', uniqueKeys: true })
  const yamlError = doc.errors[0]
  if (yamlError !== undefined) {
    const why = yamlError.message.split('\n')[0]?.replace(/ at line \d+, column \d+:?$/, '') ?? yamlError.code
    const opened = unclosedAt(doc.contents, yamlError)
    if (opened !== undefined) {
      const at = lineCounter.linePos(opened)
      throw invalidDefinition(file, at.line, `invalid YAML: ${why} (it opens here and is not closed)`, {
        column: at.col,
        yamlCode: yamlError.code,
      })
    }
    const at = yamlError.linePos?.[0] ?? lineCounter.linePos(yamlError.pos[0])
    throw invalidDefinition(file, at.line, `invalid YAML: ${why}`, { column: at.col, yamlCode: yamlError.code })
  }
  if (!isMap(doc.contents)) {
    throw invalidDefinition(file, 1, 'the frontmatter must be a YAML mapping of keys (name, description, …)')
  }
  const parsed = agentFrontmatterSchema.safeParse(doc.toJS({ maxAliasCount: 100 }))
  if (!parsed.success) {
    const issue = parsed.error.issues[0] as z.core.$ZodIssue
    const { line, key } = issueLine(doc.contents, issue, lineCounter)
    const missing = issue.code === 'invalid_type' && nodeAt(doc.contents, issue.path) === undefined
    throw invalidDefinition(file, line, issueText(issue, key, missing), { key, issues: parsed.error.issues.length })
  }
  const front = parsed.data
  if (source.expectedName !== undefined && front.name !== source.expectedName) {
    const line = keyLine(doc.contents, 'name', lineCounter) ?? 1
    throw invalidDefinition(
      file,
      line,
      `name '${front.name}' does not match the file name: a definition named '${front.name}' lives in '${front.name}.md'`,
      { key: 'name' },
    )
  }
  const instructions = split.body.trim()
  if (instructions.length === 0) {
    throw invalidDefinition(file, split.closingLine, 'the body after the frontmatter is empty: it holds the agent’s instructions')
  }
  return Object.freeze({
    name: front.name,
    description: front.description,
    ...(front.provider === undefined ? {} : { provider: front.provider }),
    ...(front.model === undefined ? {} : { model: front.model }),
    ...(front.tools === undefined ? {} : { tools: Object.freeze([...front.tools]) }),
    ...(front.budgets === undefined ? {} : { budgets: Object.freeze(dropUndefined(front.budgets)) }),
    instructions,
    file,
    scope: source.scope,
  })
}

function dropUndefined<T extends object>(value: T): T {
  return Object.fromEntries(Object.entries(value).filter(([, inner]) => inner !== undefined)) as T
}

/**
 * Where the construct that `error` says is left open begins: a flow
 * collection (`[`, `{`) or a quoted scalar that runs to where the parser
 * gave up. The parser reports such an error where it stopped looking for the
 * closing character (often the line of the closing fence), and the partial
 * document ends that node exactly there; the line a writer has to fix is the
 * one it opens on. `undefined` for every other error, which the parser places
 * where the fault is.
 */
function unclosedAt(contents: unknown, error: YAMLError): number | undefined {
  if (error.code !== 'BAD_INDENT' && error.code !== 'MISSING_CHAR') return undefined
  if (!isCollection(contents) && !isScalar(contents)) return undefined
  let start: number | undefined
  visit(contents, (_key, node) => {
    const open = isCollection(node) ? node.flow === true : isScalar(node) && (node.type === 'QUOTE_DOUBLE' || node.type === 'QUOTE_SINGLE')
    const range = open ? (node as Node).range : undefined
    if (range !== undefined && range !== null && range[1] === error.pos[0] && range[0] < error.pos[0]) {
      // The innermost such node (visited last): an unclosed quote inside `[` swallows the `]` as well.
      start = range[0]
    }
  })
  return start
}

/** The node at `path` under `root` (map keys and sequence indexes). */
function nodeAt(root: Node, path: readonly PropertyKey[]): Node | undefined {
  let node: unknown = root
  for (const step of path) {
    if (isMap(node)) node = node.items.find((item) => isScalar(item.key) && item.key.value === step)?.value
    else if (isSeq(node) && typeof step === 'number') node = node.items[step]
    else return undefined
  }
  return node as Node | undefined
}

/** The line of key `key` in map `map`. */
function keyLine(map: unknown, key: string, lineCounter: LineCounter): number | undefined {
  if (!isMap(map)) return undefined
  const pair = map.items.find((item) => isScalar(item.key) && item.key.value === key)
  const range = isScalar(pair?.key) ? pair.key.range : undefined
  return range === undefined || range === null ? undefined : lineCounter.linePos(range[0]).line
}

/** The line a zod issue concerns, and the dotted key it names. */
function issueLine(root: Node, issue: z.core.$ZodIssue, lineCounter: LineCounter): { line: number; key: string } {
  const path = issue.path
  if (issue.code === 'unrecognized_keys') {
    const unknown = issue.keys[0] ?? ''
    const parent = nodeAt(root, path)
    const line = parent === undefined ? undefined : keyLine(parent, unknown, lineCounter)
    return { line: line ?? 1, key: [...path.map(String), unknown].join('.') }
  }
  const key = path.map(String).join('.')
  for (let depth = path.length; depth > 0; depth--) {
    const node = nodeAt(root, path.slice(0, depth))
    const range = node?.range
    if (range !== undefined && range !== null) return { line: lineCounter.linePos(range[0]).line, key }
  }
  return { line: 1, key }
}

function issueText(issue: z.core.$ZodIssue, key: string, missing: boolean): string {
  if (issue.code === 'unrecognized_keys') {
    return `unknown key '${key}' (a definition has name, description, provider, model, tools, budgets; budgets has maxTokens, maxCostUsd, maxWallMs, maxTurns)`
  }
  if (missing) return `'${key}' is required`
  return `'${key}' ${issue.message}`
}
