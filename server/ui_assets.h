// Internal: the status page's files (server/ui/), embedded in tollgated at
// build time (cmake/EmbedFiles.cmake writes ui_assets.cc from them), served by
// server/status_page.h. Each view covers the file's bytes exactly and lives
// as long as the program. Thread safety: immutable data.
#ifndef TOLLGATE_SERVER_UI_ASSETS_H_
#define TOLLGATE_SERVER_UI_ASSETS_H_

#include <string_view>

namespace tollgate::server::ui_assets {

extern const std::string_view kIndexHtml;  // server/ui/index.html, served at /ui
extern const std::string_view kAppJs;      // server/ui/app.js, at /ui/app.js
extern const std::string_view kAppCss;     // server/ui/app.css, at /ui/app.css
extern const std::string_view kIconSvg;    // server/ui/icon.svg, at /ui/icon.svg

}  // namespace tollgate::server::ui_assets

#endif  // TOLLGATE_SERVER_UI_ASSETS_H_
