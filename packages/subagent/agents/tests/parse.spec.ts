import { isDshError } from '@dsh/context'
import { describe, expect, it } from 'vitest'
import { AgentDefinitionError, parseAgentDefinition } from '../src/index.js'

const source = { file: '/defs/.dsh/agents/reviewer.md', scope: 'root' as const, expectedName: 'reviewer' }

/** The typed error `text` is refused with (the test fails when it parses). */
function refusal(text: string, from = source): AgentDefinitionError {
  try {
    parseAgentDefinition(text, from)
  } catch (error) {
    expect(error).toBeInstanceOf(AgentDefinitionError)
    return error as AgentDefinitionError
  }
  throw new Error('the definition parsed')
}

const GOOD = [
  '---',
  'name: reviewer',
  'description: Reviews a diff for bugs and risky changes.',
  'provider: anthropic',
  'model: claude-sonnet-4-5',
  'tools: [read_file, grep, report]',
  'budgets:',
  '  maxTokens: 200000',
  '  maxCostUsd: 1.5',
  '  maxWallMs: 600000',
  '  maxTurns: 8',
  '---',
  '',
  'You review diffs. Point at the line, say why it is wrong.',
  '',
].join('\n')

describe('parseAgentDefinition', () => {
  it('reads every field of a good file, with the body as instructions', () => {
    const definition = parseAgentDefinition(GOOD, source)
    expect(definition).toEqual({
      name: 'reviewer',
      description: 'Reviews a diff for bugs and risky changes.',
      provider: 'anthropic',
      model: 'claude-sonnet-4-5',
      tools: ['read_file', 'grep', 'report'],
      budgets: { maxTokens: 200000, maxCostUsd: 1.5, maxWallMs: 600000, maxTurns: 8 },
      instructions: 'You review diffs. Point at the line, say why it is wrong.',
      file: source.file,
      scope: 'root',
    })
    expect(Object.isFrozen(definition)).toBe(true)
  })

  it('accepts CRLF line ends, a byte order mark, and only the required keys', () => {
    const text = '\uFEFF---\r\nname: reviewer\r\ndescription: d\r\n---\r\nBe brief.\r\n'
    expect(parseAgentDefinition(text, source)).toEqual({
      name: 'reviewer',
      description: 'd',
      instructions: 'Be brief.',
      file: source.file,
      scope: 'root',
    })
  })

  it('an unknown key is AGENT_DEFINITION_INVALID naming the file and the line of that key', () => {
    const text = GOOD.replace('provider: anthropic', 'provider: anthropic\ntemperature: 0.2')
    const error = refusal(text)
    expect(error.code).toBe('AGENT_DEFINITION_INVALID')
    expect(error.message).toMatch(/^\/defs\/\.dsh\/agents\/reviewer\.md:5: unknown key 'temperature'/)
    expect(error.details).toMatchObject({ file: source.file, line: 5, key: 'temperature' })
  })

  it('an unknown key inside budgets names its own line', () => {
    const error = refusal(GOOD.replace('  maxTurns: 8', '  maxTurns: 8\n  maxSteps: 3'))
    expect(error.details).toMatchObject({ line: 12, key: 'budgets.maxSteps' })
    expect(error.message).toContain("reviewer.md:12: unknown key 'budgets.maxSteps'")
  })

  it('a value of the wrong type names the line of that value', () => {
    const error = refusal(GOOD.replace('  maxTokens: 200000', '  maxTokens: lots'))
    expect(error.code).toBe('AGENT_DEFINITION_INVALID')
    expect(error.details).toMatchObject({ file: source.file, line: 8, key: 'budgets.maxTokens' })
    expect(error.message).toMatch(/reviewer\.md:8: 'budgets\.maxTokens' /)

    const tools = refusal(GOOD.replace('tools: [read_file, grep, report]', 'tools:\n  - read_file\n  - 7'))
    expect(tools.details).toMatchObject({ line: 8, key: 'tools.1' })

    const description = refusal(GOOD.replace('description: Reviews a diff for bugs and risky changes.', 'description: [a, b]'))
    expect(description.details).toMatchObject({ line: 3, key: 'description' })
    expect(description.message).toContain("reviewer.md:3: 'description' must be a string")

    const budgets = refusal(GOOD.replace(/budgets:\n( {2}.*\n)+/, 'budgets: 3\n'))
    expect(budgets.message).toContain("reviewer.md:7: 'budgets' must be a mapping of maxTokens, maxCostUsd, maxWallMs and maxTurns")
  })

  it('bad YAML names the line and column the parser reports', () => {
    const error = refusal(GOOD.replace('model: claude-sonnet-4-5', 'model: claude: sonnet'))
    expect(error.code).toBe('AGENT_DEFINITION_INVALID')
    expect(error.message).toBe('/defs/.dsh/agents/reviewer.md:5: invalid YAML: Nested mappings are not allowed in compact mappings')
    expect(error.details).toMatchObject({ file: source.file, line: 5, column: 8, yamlCode: 'BLOCK_AS_IMPLICIT_KEY' })

    const tab = refusal(GOOD.replace('  maxTurns: 8', '\tmaxTurns: 8'))
    expect(tab.details).toMatchObject({ line: 11, yamlCode: 'TAB_AS_INDENT' })

    const duplicate = refusal(GOOD.replace('model: claude-sonnet-4-5', 'model: a\nmodel: b'))
    expect(duplicate.details).toMatchObject({ line: 6, yamlCode: 'DUPLICATE_KEY' })
  })

  it('an unclosed bracket, brace or quote is placed on the line it opens on, not where the parser gave up', () => {
    const opened = (frontmatter: string) => refusal(`---\n${frontmatter}\n---\nbody\n`).details
    // The parser reports these at the closing fence (line 4 and later): the line to fix is where they open.
    expect(opened('name: reviewer\ndescription: [unclosed')).toMatchObject({ line: 3, column: 14, yamlCode: 'BAD_INDENT' })
    expect(opened('name: reviewer\ndescription: {a: 1\nmodel: m')).toMatchObject({ line: 3, column: 14 })
    expect(opened('name: reviewer\ndescription: "unclosed\nmodel: m')).toMatchObject({ line: 3, column: 14, yamlCode: 'MISSING_CHAR' })
    expect(opened("name: reviewer\ndescription: d\ntools: [a,\n  b\nmodel: 'm")).toMatchObject({ line: 4, column: 8 })
    expect(opened('name: reviewer\ndescription: d\ntools: [a, "b]\nmodel: m')).toMatchObject({ line: 4, column: 12 })
    expect(opened('[a, b')).toMatchObject({ line: 2, column: 1 })
    const message = refusal('---\nname: reviewer\ndescription: [unclosed\n---\nbody\n').message
    expect(message).toBe(
      '/defs/.dsh/agents/reviewer.md:3: invalid YAML: Flow sequence in block collection must be sufficiently indented and end with a ] (it opens here and is not closed)',
    )
    // Errors the parser places where the fault is keep their line, on any line of the frontmatter.
    expect(opened('name: reviewer\ndescription: x: y')).toMatchObject({ line: 3, column: 14 })
    expect(opened('name: reviewer\ndescription: "a" b')).toMatchObject({ line: 3, yamlCode: 'UNEXPECTED_TOKEN' })
    expect(opened('name: reviewer\ndescription: |\n  x\n y')).toMatchObject({ line: 5, yamlCode: 'BAD_INDENT' })
  })

  it('a provider outside openai and anthropic is refused at its line', () => {
    const error = refusal(GOOD.replace('provider: anthropic', 'provider: nosuchprovider'))
    expect(error.code).toBe('AGENT_DEFINITION_INVALID')
    expect(error.message).toBe("/defs/.dsh/agents/reviewer.md:4: 'provider' must be one of openai, anthropic")
    expect(parseAgentDefinition(GOOD.replace('provider: anthropic', 'provider: openai'), source).provider).toBe('openai')
  })

  it('a missing required key points at the opening fence; a name that is not the file name at the name', () => {
    const missing = refusal(GOOD.replace('description: Reviews a diff for bugs and risky changes.\n', ''))
    expect(missing.message).toContain("reviewer.md:1: 'description' is required")

    const other = refusal(GOOD.replace('name: reviewer', 'name: critic'))
    expect(other.details).toMatchObject({ line: 2, key: 'name' })
    expect(other.message).toContain("'critic.md'")
  })

  it('refuses a file without fences, with an unclosed frontmatter, with a non-mapping frontmatter or an empty body', () => {
    expect(refusal('name: reviewer\n').message).toContain("reviewer.md:1: a definition starts with a '---' line")
    expect(refusal('---\nname: reviewer\n').message).toContain('reviewer.md:1: the frontmatter opened on this line has no closing')
    expect(refusal('---\n- a\n---\nbody\n').message).toContain('reviewer.md:1: the frontmatter must be a YAML mapping')
    const empty = refusal('---\nname: reviewer\ndescription: d\n---\n  \n')
    expect(empty.details).toMatchObject({ line: 4 })
  })

  it('refuses names a file could not carry, and values out of range', () => {
    expect(refusal(GOOD.replace('name: reviewer', 'name: ../etc'), { ...source, expectedName: undefined as never }).details).toMatchObject({
      key: 'name',
      line: 2,
    })
    expect(refusal(GOOD.replace('maxCostUsd: 1.5', 'maxCostUsd: -1')).details).toMatchObject({ key: 'budgets.maxCostUsd', line: 9 })
    expect(refusal(GOOD.replace('maxTurns: 8', 'maxTurns: 2.5')).details).toMatchObject({ key: 'budgets.maxTurns', line: 11 })
    expect(refusal(GOOD.replace('tools: [read_file, grep, report]', 'tools: [grep, grep]')).details).toMatchObject({
      key: 'tools',
      line: 6,
    })
  })

  it('every refusal is a dsh error carrying its code', () => {
    const error = refusal('nothing')
    expect(isDshError(error, 'AGENT_DEFINITION_INVALID')).toBe(true)
    expect(error.toJSON()).toEqual({ code: 'AGENT_DEFINITION_INVALID', message: error.message })
  })
})
