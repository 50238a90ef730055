/** A definition file split at its `---` fences. */
export interface FrontmatterSplit {
  /**
   * The YAML between the fences, preceded by one empty line standing for the
   * opening fence, so that a line number the YAML parser reports is the
   * file's line number.
   */
  readonly yaml: string
  /** The markdown after the closing fence. */
  readonly body: string
  /** The file's line number of the closing fence. */
  readonly closingLine: number
}

/** Why a file has no frontmatter, and on which line. */
export interface FrontmatterProblem {
  readonly line: number
  readonly message: string
}

const FENCE = /^---[ \t]*$/

/**
 * Splits a definition at its fences: the first line must be `---` (after an
 * optional byte order mark) and the frontmatter ends at the next line that is
 * `---`. Nothing else is interpreted here; the YAML parser reads what lies
 * between. `\r\n` line ends are accepted.
 */
export function splitFrontmatter(text: string): FrontmatterSplit | FrontmatterProblem {
  const source = text.startsWith('\uFEFF') ? text.slice(1) : text
  const lines = source.split(/\r?\n/)
  if (!FENCE.test(lines[0] ?? '')) {
    return { line: 1, message: "a definition starts with a '---' line, then its YAML frontmatter, then a closing '---' line" }
  }
  for (let i = 1; i < lines.length; i++) {
    if (FENCE.test(lines[i] ?? '')) {
      return { yaml: `\n${lines.slice(1, i).join('\n')}\n`, body: lines.slice(i + 1).join('\n'), closingLine: i + 1 }
    }
  }
  return { line: 1, message: "the frontmatter opened on this line has no closing '---' line" }
}
