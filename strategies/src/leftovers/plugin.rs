//! Which build of the plugin serving `x-delayed-message` the broker runs:
//! its application, version and a hash of the code the node has loaded,
//! for `run.json` (the repository's sources say what could have run; this
//! says what did).
//!
//! On this host's default node one `rabbitmqctl eval` asks the broker which
//! module its exchange registry maps `x-delayed-message` to, that module's
//! application and version, and each of the application's modules' MD5 as
//! loaded (`Module:module_info(md5)`, the same as `beam_lib:md5/1` of its
//! `.beam`, so a build folder can be compared offline). The code hash is
//! SHA-256, computed on the node, of the lines `<module> <md5 hex>\n` in
//! module order (`not-loaded` for a module the node has not loaded).
//! Any other broker (a container, a remote host) is read through its
//! management API, which names the plugins' applications and versions but
//! not their code: the hash then says `unknown` and why.

use super::broker::{rabbitmqctl, BrokerAddress};
use super::management::{build_client, get_list};
use std::collections::BTreeMap;
use std::time::Duration;

/// What was read, or `unknown` in each field that could not be, with why
/// in [`PluginBuild::source`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PluginBuild {
    /// The Erlang application serving `x-delayed-message`
    /// (`delaybench_delayed_exchange`, `rabbitmq_delayed_message_exchange`),
    /// `none` when no plugin serves it, or `unknown`.
    pub name: String,
    /// Its application version, or `unknown`.
    pub version: String,
    /// SHA-256 (hex) of its modules' `<module> <md5 hex>\n` lines as the
    /// node loaded them, or `unknown`.
    pub code_sha256: String,
    /// Each module's MD5 (hex) as loaded, or `not-loaded`; empty when not
    /// read.
    pub modules: BTreeMap<String, String>,
    /// The folder the node loaded the application from, when read.
    pub dir: Option<String>,
    /// How it was read (`rabbitmqctl eval on this host's default node`, the
    /// management API's URL), with why anything says `unknown`.
    pub source: String,
}

/// Bounds on what a reply may make this allocate.
const MAX_MODULES: usize = 256;
const MAX_FIELD: usize = 4096;

const UNKNOWN: &str = "unknown";

impl PluginBuild {
    /// Nothing read, with `why`.
    pub fn unknown(why: impl Into<String>) -> PluginBuild {
        PluginBuild {
            name: UNKNOWN.into(),
            version: UNKNOWN.into(),
            code_sha256: UNKNOWN.into(),
            modules: BTreeMap::new(),
            dir: None,
            source: why.into(),
        }
    }
}

/// The build of the plugin serving `x-delayed-message` on the broker of
/// `amqp_url` (a cluster's list: its first node). Never fails: what could
/// not be read says `unknown`, and [`PluginBuild::source`] says why.
pub async fn delayed_plugin_build(amqp_url: &str) -> PluginBuild {
    let Some(first) = crate::rabbit::nodes::split(amqp_url).into_iter().next() else {
        return PluginBuild::unknown("not read: no AMQP URL");
    };
    let address = match BrokerAddress::of(first).await {
        Ok(a) => a,
        Err(e) => return PluginBuild::unknown(format!("not read: {e}")),
    };
    let mut ctl_error = None;
    if address.default_node {
        match with_rabbitmqctl().await {
            Ok(build) => return build,
            Err(e) => ctl_error = Some(e),
        }
    }
    let api = format!("{}/api", address.api_root);
    let ctl = match ctl_error {
        Some(e) => format!("rabbitmqctl: {e}"),
        None => "rabbitmqctl answers only for the default node of the broker's own host".into(),
    };
    match over_api(&address).await {
        Ok(mut build) if build.name != "none" => {
            build.code_sha256 = format!(
                "{UNKNOWN}: the management API names the application and its version, not \
                 its code ({ctl})"
            );
            build
        }
        Ok(none) => none,
        Err(http_error) => PluginBuild::unknown(format!(
            "not read: {ctl}; management API {api}: {http_error}"
        )),
    }
}

/// The node's answer to [`EVAL`], parsed.
async fn with_rabbitmqctl() -> std::result::Result<PluginBuild, String> {
    let text = rabbitmqctl(&["-q", "eval", EVAL], Duration::from_secs(30))
        .await
        .map_err(|e| format!("eval: {e}"))?;
    parse_eval(&text)
}

/// Asks the node which module serves `x-delayed-message`, its application,
/// version, folder, and each module's MD5 as loaded, and hashes those
/// lines; answers one string of `;`-separated `key=value` fields, or
/// `none`.
const EVAL: &str = r#"Hex = fun(B) -> lists:flatten([io_lib:format("~2.16.0b", [X]) || <<X>> <= B]) end,
case rabbit_registry:lookup_module(exchange, 'x-delayed-message') of
  {ok, M} ->
    App = case application:get_application(M) of {ok, A} -> A; undefined -> M end,
    Vsn = case application:get_key(App, vsn) of {ok, V} -> V; _ -> "unknown" end,
    Mods = case application:get_key(App, modules) of {ok, Ms} -> lists:sort(Ms); _ -> [M] end,
    Dir = case code:lib_dir(App) of D when is_list(D) -> D; _ -> "" end,
    Lines = [case code:is_loaded(Mod) of
               false -> {Mod, "not-loaded"};
               _ -> {Mod, Hex(Mod:module_info(md5))}
             end || Mod <- Mods],
    Text = [io_lib:format("~s ~s~n", [Mod, H]) || {Mod, H} <- Lines],
    lists:flatten(io_lib:format("app=~s;vsn=~s;dir=~s;sha256=~s~s",
      [App, Vsn, Dir, Hex(crypto:hash(sha256, Text)),
       [io_lib:format(";mod=~s:~s", [Mod, H]) || {Mod, H} <- Lines]]));
  _ -> "none"
end."#;

const SOURCE_CTL: &str = "rabbitmqctl eval on this host's default node";

/// [`EVAL`]'s reply as rabbitmqctl prints it: an Erlang string, quoted,
/// which a long reply may split over lines.
fn parse_eval(text: &str) -> std::result::Result<PluginBuild, String> {
    let joined: String = text
        .lines()
        .map(|l| l.trim().trim_matches('"'))
        .collect::<Vec<_>>()
        .concat();
    if joined == "none" {
        return Ok(PluginBuild {
            name: "none".into(),
            version: "none".into(),
            code_sha256: "none".into(),
            modules: BTreeMap::new(),
            dir: None,
            source: format!("{SOURCE_CTL}: no exchange type x-delayed-message on the broker"),
        });
    }
    let unexpected = || {
        let shown: String = text.trim().chars().take(200).collect();
        format!("unexpected eval reply {shown:?}")
    };
    let mut build = PluginBuild {
        source: SOURCE_CTL.into(),
        ..PluginBuild::unknown("")
    };
    for field in joined.split(';') {
        let (key, value) = field.split_once('=').ok_or_else(unexpected)?;
        if value.len() > MAX_FIELD {
            return Err(unexpected());
        }
        match key {
            "app" => build.name = value.to_string(),
            "vsn" => build.version = value.to_string(),
            "dir" => build.dir = (!value.is_empty()).then(|| value.to_string()),
            "sha256" if is_hex(value, 64) => build.code_sha256 = value.to_string(),
            "mod" if build.modules.len() < MAX_MODULES => {
                let (module, md5) = value.rsplit_once(':').ok_or_else(unexpected)?;
                if !(is_hex(md5, 32) || md5 == "not-loaded") {
                    return Err(unexpected());
                }
                build.modules.insert(module.to_string(), md5.to_string());
            }
            _ => return Err(unexpected()),
        }
    }
    if build.name == UNKNOWN || build.code_sha256 == UNKNOWN || build.modules.is_empty() {
        return Err(unexpected());
    }
    Ok(build)
}

fn is_hex(s: &str, len: usize) -> bool {
    s.len() == len && s.bytes().all(|b| b.is_ascii_hexdigit())
}

/// The project's and the community's plugin, as the API names their
/// applications.
const KNOWN: [&str; 2] = [
    "delaybench_delayed_exchange",
    "rabbitmq_delayed_message_exchange",
];

/// The plugin's application and version from `GET /api/nodes` (the first
/// node listing one of [`KNOWN`]).
async fn over_api(address: &BrokerAddress) -> std::result::Result<PluginBuild, String> {
    let root = &address.api_root;
    let client = build_client(address.api_client().map_err(|e| e.to_string())?)?;
    let nodes = get_list(
        &client,
        root,
        "/api/nodes?columns=name,applications",
        &address.uri,
    )
    .await?;
    let source = format!("management API {root}/api/nodes");
    for node in &nodes {
        let Some(apps) = node["applications"].as_array() else {
            continue;
        };
        for app in apps {
            let name = app["name"].as_str().unwrap_or_default();
            if KNOWN.contains(&name) {
                let version = app["version"].as_str().unwrap_or(UNKNOWN);
                return Ok(PluginBuild {
                    name: name.to_string(),
                    version: version.chars().take(MAX_FIELD).collect(),
                    source,
                    ..PluginBuild::unknown("")
                });
            }
        }
    }
    Ok(PluginBuild {
        name: "none".into(),
        version: "none".into(),
        source: format!(
            "{source}: no node runs {} (another plugin may serve x-delayed-message)",
            KNOWN.join(" or ")
        ),
        ..PluginBuild::unknown("")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const REPLY: &str = "\"app=delaybench_delayed_exchange;vsn=0.2.0;dir=/usr/lib/rabbitmq/plugins/delaybench_delayed_exchange-0.2.0;sha256=0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef;mod=delaybench_delayed_app:6ea8b3f441c9579e71f153086dae16b9;mod=delaybench_delayed_sup:not-loaded\"\n";

    #[test]
    fn a_reply_gives_the_application_its_version_and_each_module() {
        let b = parse_eval(REPLY).unwrap();
        assert_eq!(b.name, "delaybench_delayed_exchange");
        assert_eq!(b.version, "0.2.0");
        assert_eq!(&b.code_sha256[..8], "01234567");
        assert_eq!(
            b.dir.as_deref(),
            Some("/usr/lib/rabbitmq/plugins/delaybench_delayed_exchange-0.2.0")
        );
        assert_eq!(
            b.modules["delaybench_delayed_app"],
            "6ea8b3f441c9579e71f153086dae16b9"
        );
        assert_eq!(b.modules["delaybench_delayed_sup"], "not-loaded");
        assert_eq!(b.source, SOURCE_CTL);
    }

    #[test]
    fn a_reply_split_over_lines_reads_the_same() {
        let split = REPLY.replacen(";mod=", "\"\n  \";mod=", 1);
        assert_eq!(parse_eval(&split).unwrap(), parse_eval(REPLY).unwrap());
    }

    #[test]
    fn no_plugin_is_none_and_anything_else_is_refused() {
        assert_eq!(parse_eval("\"none\"\n").unwrap().name, "none");
        for bad in [
            "{badrpc,nodedown}",
            "\"app=x;vsn=1\"",
            &REPLY.replace("sha256=0123", "sha256=zz23"),
            &REPLY.replace(":6ea8", ":6eZ8"),
            &REPLY.replace("vsn=", "what="),
        ] {
            assert!(parse_eval(bad).is_err(), "{bad}");
        }
    }
}
