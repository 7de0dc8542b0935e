// CookiesCommand.swift — `courier cookies ls | set NAME VALUE --domain D | rm NAME --domain D |
// clear`: the cookie jar of a store directory (the one an app gives Configuration.storeDirectory),
// with --json for scripts. Every operation is the C core's jar through the Swift facade.
import ArgumentParser
import Courier
import Foundation

struct CookiesCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "cookies",
        abstract: "List, set, remove and clear the cookie jar of a store directory.",
        subcommands: [CookiesListCommand.self, CookiesSetCommand.self, CookiesRemoveCommand.self,
                      CookiesClearCommand.self]
    )
}

private func printJSONLine(_ object: Any) throws {
    let data = try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])
    writeOut(data + Data("\n".utf8))
}

struct CookiesListCommand: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "ls", abstract: "List the cookies.")
    @OptionGroup var options: CacheOptions

    func run() throws {
        try withEngine(options, storeMustExist: true) { engine in
            let cookies = try engine.cookies.all()
            if options.json {
                try printJSONLine(cookies.map {
                    ["name": $0.name, "value": $0.value, "domain": $0.domain, "path": $0.path,
                     "expires": $0.expires.map { Int64($0.timeIntervalSince1970) } ?? 0,
                     "include_subdomains": $0.includeSubdomains, "secure": $0.secure,
                     "http_only": $0.httpOnly] as [String: Any]
                })
                return
            }
            for c in cookies {
                var flags: [String] = []
                if c.includeSubdomains { flags.append("subdomains") }
                if c.secure { flags.append("secure") }
                if c.httpOnly { flags.append("httponly") }
                let expires = c.expires.map { ISO8601DateFormatter().string(from: $0) } ?? "session"
                print("\(c.domain)\t\(c.path)\t\(c.name)=\(c.value)\t\(expires)\t\(flags.joined(separator: ","))")
            }
            if cookies.isEmpty { print("(empty)") }
        }
    }
}

struct CookiesSetCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "set", abstract: "Add or replace a cookie (same domain, path and name).")
    @OptionGroup var options: CacheOptions
    @Argument(help: "The cookie's name.") var name: String
    @Argument(help: "The cookie's value.") var value: String
    @Option(help: "The host it belongs to.") var domain: String
    @Option(help: "Its path.") var path = "/"
    @Option(help: ArgumentHelp("Seconds until it expires (0 or less removes it; none: a session cookie).",
                               valueName: "seconds")) var maxAge: Int?
    @Flag(help: "Also send it to subdomains (a Domain cookie).") var subdomains = false
    @Flag(help: "Send it over https only.") var secure = false
    @Flag(help: "Mark it HttpOnly.") var httpOnly = false

    func run() throws {
        try withEngine(options, storeMustExist: false) { engine in
            let expires = maxAge.map { $0 > 0 ? Date().addingTimeInterval(Double($0)) : Date(timeIntervalSince1970: 1) }
            try engine.cookies.set(Cookie(name: name, value: value, domain: domain, path: path, expires: expires,
                                          includeSubdomains: subdomains, secure: secure, httpOnly: httpOnly))
            if options.json { try printJSONLine(["set": 1]) } else { print("set") }
        }
    }
}

struct CookiesRemoveCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "rm", abstract: "Remove one cookie.", discussion: "Exit status 1 when there is no such cookie.")
    @OptionGroup var options: CacheOptions
    @Argument(help: "The cookie's name.") var name: String
    @Option(help: "The host it belongs to.") var domain: String
    @Option(help: "Its path.") var path = "/"

    func run() throws {
        try withEngine(options, storeMustExist: true) { engine in
            try engine.cookies.remove(name: name, domain: domain, path: path)
            if options.json { try printJSONLine(["removed": 1]) } else { print("removed") }
        }
    }
}

struct CookiesClearCommand: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "clear", abstract: "Remove every cookie.")
    @OptionGroup var options: CacheOptions

    func run() throws {
        try withEngine(options, storeMustExist: true) { engine in
            let n = try engine.cookies.clear()
            if options.json { try printJSONLine(["removed": n]) } else { print("removed \(n) cookies") }
        }
    }
}
